package docfmt_test

import (
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/docfmt"
)

func TestIsDeleteMarker(t *testing.T) {
	require.True(t, docfmt.IsDeleteMarker([]byte{0xc1}))
	for _, v := range [][]byte{nil, {}, {0xc1, 0x00}, {0x00, 0xc1}, {0xc0}, []byte("{}")} {
		require.False(t, docfmt.IsDeleteMarker(v), "%x", v)
	}
}

// No value of the default codec encodes to the marker.
func TestMsgpackNeverWritesTheMarker(t *testing.T) {
	for _, v := range []any{nil, 0, -1, 1 << 40, "", "x", []byte{}, false, true, 1.5, map[string]int{}, []int{}} {
		b, err := codec.Msgpack[any]{}.Append(nil, v)
		require.NoError(t, err)
		require.False(t, docfmt.IsDeleteMarker(b), "%v encodes to %x", v, b)
	}
}

func TestHeaderAndEscape(t *testing.T) {
	v := append(docfmt.AppendHeader(nil, 1234), "doc"...)
	require.Len(t, v, docfmt.HeaderSize+3)
	doc, exp := docfmt.Split(v)
	require.Equal(t, "doc", string(doc))
	require.EqualValues(t, 1234, exp)
	require.False(t, docfmt.IsDeleteMarker(v))
	require.False(t, docfmt.Expired(v, 1233))
	require.True(t, docfmt.Expired(v, 1234))

	_, exp = docfmt.Split(docfmt.AppendHeader(nil, -5))
	require.EqualValues(t, 1, exp, "an expiry is never 0, which means none")

	for _, enc := range [][]byte{{0xc1}, {0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 9}, {0xc1, 0x00}, []byte("plain"), {}} {
		stored := docfmt.Escape(append([]byte("pre"), enc...), 3)[3:]
		require.False(t, docfmt.IsDeleteMarker(stored), "%x", enc)
		require.False(t, docfmt.Expired(stored, 1<<62), "%x", enc)
		doc, exp := docfmt.Split(stored)
		require.Equal(t, string(enc), string(doc), "%x", enc)
		require.Zero(t, exp)
	}
	require.Equal(t, []byte("plain"), docfmt.Escape([]byte("plain"), 0), "only a C1 first byte is escaped")

	// Values of format 2 that start with C1 and are no escape or header read as they are.
	for _, old := range [][]byte{{0xc1, 0x02}, {0xc1, 0x01, 1, 2, 3}, {0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 'x'}, {0xc1, 0xc1}} {
		doc, exp := docfmt.Split(old)
		require.Equal(t, old, doc, "%x", old)
		require.Zero(t, exp)
	}
}

// Whatever a codec writes, and whatever expiry, Split gives back what was
// stored; and no stored value makes Split or Expired panic.
func FuzzSplit(f *testing.F) {
	f.Add([]byte{0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 9, 'x'}, int64(0))
	f.Add([]byte{0xc1}, int64(7))
	f.Add([]byte("plain"), int64(-1))
	f.Fuzz(func(t *testing.T, enc []byte, expires int64) {
		docfmt.Split(enc)
		docfmt.Expired(enc, expires)
		var stored []byte
		if expires > 0 {
			stored = append(docfmt.AppendHeader(nil, expires), enc...)
		} else {
			stored = docfmt.Escape(append([]byte(nil), enc...), 0)
		}
		require.False(t, docfmt.IsDeleteMarker(stored))
		doc, exp := docfmt.Split(stored)
		require.Equal(t, string(enc), string(doc))
		require.Equal(t, max(expires, 0), exp)
	})
}

// reading is what a reader takes a stored value for.
type reading struct {
	deleted bool
	doc     string
	expires int64
}

func readAs(r docfmt.Rules, v []byte) reading {
	if r.IsDeleteMarker(v) {
		return reading{deleted: true}
	}
	doc, exp := r.Split(v)
	// HasExpiry is a check of the header's bytes: it may say yes to a
	// value whose expiry turns out malformed (a document then).
	if (exp != 0 && !r.HasExpiry(v)) || r.Expired(v, math.MaxInt64) != (exp != 0) {
		panic("HasExpiry or Expired disagree with Split")
	}
	return reading{doc: string(doc), expires: exp}
}

// Older formats read every value as a document, format 2 the single byte
// C1 as a delete marker; neither knows escapes or headers.
func TestRulesOfOlderFormats(t *testing.T) {
	f1, f2, f3, f4 := docfmt.RulesOf(1), docfmt.RulesOf(2), docfmt.RulesOf(3), docfmt.RulesOf(4)
	require.Equal(t, docfmt.Rules{}, f4, "the zero Rules are the current format's")
	require.True(t, f4.Current())
	require.False(t, f3.Current())
	require.False(t, f2.Current())
	require.Equal(t, reading{doc: "\xc1"}, readAs(f1, []byte{0xc1}))
	require.Equal(t, reading{deleted: true}, readAs(f2, []byte{0xc1}))
	header := []byte{0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 5, 'x'}
	for _, r := range []docfmt.Rules{f1, f2} {
		require.Equal(t, reading{doc: "\xc1\x00abc"}, readAs(r, []byte{0xc1, 0x00, 'a', 'b', 'c'}))
		require.Equal(t, reading{doc: string(header)}, readAs(r, header))
	}
	for _, r := range []docfmt.Rules{f3, f4} {
		require.Equal(t, reading{doc: "abc"}, readAs(r, []byte{0xc1, 0x00, 'a', 'b', 'c'}))
		require.Equal(t, reading{doc: "x", expires: 5}, readAs(r, header))
		require.Equal(t, reading{deleted: true}, readAs(r, []byte{0xc1}))
	}
	// A version header is a document to format 3 (it wrote none), and a
	// header to format 4.
	timed := append(docfmt.AppendVersion(nil, 9, false, 0, nil), 'y')
	require.Equal(t, reading{doc: string(timed)}, readAs(f3, timed))
	require.Equal(t, reading{doc: "y"}, readAs(f4, timed))
	require.Zero(t, f3.Parse(timed).Time)
	require.EqualValues(t, 9, f4.Parse(timed).Time)
}

// Upgrade escapes every value of an older format that starts with C1 but
// a delete marker of format 2, and nothing else.
func TestUpgrade(t *testing.T) {
	for _, c := range []struct {
		from    int
		v, want []byte
	}{
		{1, []byte{0xc1}, []byte{0xc1, 0x00, 0xc1}},
		{2, []byte{0xc1}, []byte{0xc1}},
		{2, []byte{0xc1, 0x00, 'a'}, []byte{0xc1, 0x00, 0xc1, 0x00, 'a'}},
		{2, []byte{0xc1, 0x02}, []byte{0xc1, 0x00, 0xc1, 0x02}},
		{2, []byte{}, []byte{}},
		{2, []byte("plain"), []byte("plain")},
		{3, []byte{0xc1, 0x00, 'a'}, []byte{0xc1, 0x00, 'a'}},
		{3, []byte{0xc1}, []byte{0xc1}},
		{3, docfmt.AppendHeader(nil, 5), docfmt.AppendHeader(nil, 5)},
		{3, []byte{0xc1, 0x02}, []byte{0xc1, 0x02}},                   // a document to both
		{3, []byte{0xc1, 0x10, 0, 0, 0}, []byte{0xc1, 0x10, 0, 0, 0}}, // too short for a header: a document to both
		{3, []byte{0xc1, 0x10, 0, 0, 0, 0, 0, 0, 0, 1, 'a'}, []byte{0xc1, 0x00, 0xc1, 0x10, 0, 0, 0, 0, 0, 0, 0, 1, 'a'}},
		{3, []byte{0xc1, 0x14, 0, 0, 0, 0, 0, 0, 0, 1}, []byte{0xc1, 0x00, 0xc1, 0x14, 0, 0, 0, 0, 0, 0, 0, 1}},
		{4, []byte{0xc1, 0x10, 0, 0, 0, 0, 0, 0, 0, 1, 'a'}, []byte{0xc1, 0x10, 0, 0, 0, 0, 0, 0, 0, 1, 'a'}},
	} {
		got, changed := docfmt.Upgrade(c.from, c.v)
		require.Equal(t, c.want, got, "from %d: %x", c.from, c.v)
		require.Equal(t, string(c.want) != string(c.v), changed)
	}
}

// Canonical is false only for C1 values that no format writes.
func TestCanonical(t *testing.T) {
	for _, v := range [][]byte{nil, {}, {0xc1}, {0xc1, 0x00}, {0xc1, 0x00, 0xc1}, docfmt.AppendHeader(nil, 7), []byte("x"),
		docfmt.AppendVersion(nil, 1, false, 0, nil), docfmt.AppendVersion(nil, 1, true, 0, []byte("m")), docfmt.AppendVersion(nil, 5, false, 6, []byte{})} {
		require.True(t, docfmt.Canonical(v), "%x", v)
	}
	for _, v := range [][]byte{{0xc1, 0x02}, {0xc1, 0xc1}, {0xc1, 0x01, 1}, {0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 0}, {0xc1, 0x01, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0xc1, 0x10, 0, 0, 0, 0, 0, 0, 0, 0}, {0xc1, 0x15, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, {0xc1, 0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'x'},
		{0xc1, 0x12, 0, 0, 0, 0, 0, 0, 0, 1, 5, 'a'}, {0xc1, 0x11, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}, {0xc1, 0x18}} {
		require.False(t, docfmt.Canonical(v), "%x", v)
	}
}

// The upgrade's rule: whatever a store of format 1, 2 or 3 held, the
// value Upgrade makes of it reads, by the current format, as the original
// read by its own; from formats 1 and 2 what the current format reads is
// canonical (from 3, a non-canonical value stays so unless it would be
// misread).
func FuzzUpgrade(f *testing.F) {
	f.Add([]byte{0xc1, 0x01, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(2))
	f.Add([]byte{0xc1}, uint8(1))
	f.Add([]byte{0xc1, 0x00, 'a'}, uint8(2))
	f.Add([]byte("plain"), uint8(1))
	f.Add([]byte{0xc1, 0x12, 0, 0, 0, 0, 0, 0, 0, 1, 1, 'm', 'd'}, uint8(3))
	f.Fuzz(func(t *testing.T, v []byte, from uint8) {
		from = from%3 + 1
		up, _ := docfmt.Upgrade(int(from), v)
		require.Equal(t, readAs(docfmt.RulesOf(int(from)), v), readAs(docfmt.Rules{}, up), "from %d: %x became %x", from, v, up)
		require.Zero(t, docfmt.Rules{}.Parse(up).Time, "a value of format %d has no commit time", from)
		if from < 3 {
			require.True(t, docfmt.Canonical(up), "%x", up)
		}
	})
}

// Whatever AppendVersion writes, Parse gives back; and no stored value
// makes Parse panic.
func FuzzVersion(f *testing.F) {
	f.Add([]byte("doc"), int64(5), false, int64(0), []byte(nil))
	f.Add([]byte{0xc1}, int64(1), false, int64(7), []byte("meta"))
	f.Add([]byte{}, int64(-3), true, int64(7), []byte{})
	f.Fuzz(func(t *testing.T, doc []byte, tm int64, deleted bool, expires int64, meta []byte) {
		docfmt.Rules{}.Parse(doc)
		docfmt.RulesOf(3).Parse(doc)
		if len(meta) > docfmt.MaxMetaSize {
			return
		}
		v := docfmt.AppendVersion(nil, tm, deleted, expires, meta)
		if !deleted {
			v = append(v, doc...)
		}
		require.True(t, docfmt.Canonical(v), "%x", v)
		got := docfmt.Rules{}.Parse(v)
		require.Equal(t, max(tm, 1), got.Time)
		require.Equal(t, deleted, got.Deleted)
		require.Equal(t, deleted, docfmt.Rules{}.IsDeleteMarker(v))
		require.Equal(t, meta != nil, got.Meta != nil)
		require.Equal(t, string(meta), string(got.Meta))
		if deleted {
			require.Nil(t, got.Doc)
			require.Zero(t, got.Expires)
			return
		}
		require.Equal(t, string(doc), string(got.Doc))
		require.Equal(t, max(expires, 0), got.Expires)
		require.Equal(t, expires > 0, docfmt.HasExpiry(v))
		// A header is never misread by format 3 as a marker or an expiry.
		require.Equal(t, readAs(docfmt.RulesOf(3), v), reading{doc: string(v)})
	})
}

// The example in the package doc.
func TestVersionExample(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC).UnixNano()
	v := append(docfmt.AppendVersion(nil, at, false, 0, nil), 0x81, 0xa1, 0x61, 0x01)
	require.Equal(t, "c11018eb968af5288000"+"81a16101", hex.EncodeToString(v))
	require.Equal(t, "c11418eb968af5288001", hex.EncodeToString(docfmt.AppendVersion(nil, at+1, true, 0, nil)))
}
