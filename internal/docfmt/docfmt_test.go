package docfmt_test

import (
	"math"
	"testing"

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
	if r.HasExpiry(v) != (exp != 0) || r.Expired(v, math.MaxInt64) != (exp != 0) {
		panic("HasExpiry or Expired disagree with Split")
	}
	return reading{doc: string(doc), expires: exp}
}

// Older formats read every value as a document, format 2 the single byte
// C1 as a delete marker; neither knows escapes or headers.
func TestRulesOfOlderFormats(t *testing.T) {
	f1, f2, f3 := docfmt.RulesOf(1), docfmt.RulesOf(2), docfmt.RulesOf(3)
	require.Equal(t, docfmt.Rules{}, f3, "the zero Rules are the current format's")
	require.True(t, f3.Current())
	require.False(t, f2.Current())
	require.Equal(t, reading{doc: "\xc1"}, readAs(f1, []byte{0xc1}))
	require.Equal(t, reading{deleted: true}, readAs(f2, []byte{0xc1}))
	header := []byte{0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 5, 'x'}
	for _, r := range []docfmt.Rules{f1, f2} {
		require.Equal(t, reading{doc: "\xc1\x00abc"}, readAs(r, []byte{0xc1, 0x00, 'a', 'b', 'c'}))
		require.Equal(t, reading{doc: string(header)}, readAs(r, header))
	}
	require.Equal(t, reading{doc: "abc"}, readAs(f3, []byte{0xc1, 0x00, 'a', 'b', 'c'}))
	require.Equal(t, reading{doc: "x", expires: 5}, readAs(f3, header))
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
	} {
		got, changed := docfmt.Upgrade(c.from, c.v)
		require.Equal(t, c.want, got, "from %d: %x", c.from, c.v)
		require.Equal(t, string(c.want) != string(c.v), changed)
	}
}

// Canonical is false only for C1 values that format 3 never writes.
func TestCanonical(t *testing.T) {
	for _, v := range [][]byte{nil, {}, {0xc1}, {0xc1, 0x00}, {0xc1, 0x00, 0xc1}, docfmt.AppendHeader(nil, 7), []byte("x")} {
		require.True(t, docfmt.Canonical(v), "%x", v)
	}
	for _, v := range [][]byte{{0xc1, 0x02}, {0xc1, 0xc1}, {0xc1, 0x01, 1}, {0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 0}, {0xc1, 0x01, 0x80, 0, 0, 0, 0, 0, 0, 0}} {
		require.False(t, docfmt.Canonical(v), "%x", v)
	}
}

// The upgrade's rule: whatever a store of format 1 or 2 held, the value
// Upgrade makes of it reads, by the current format, as the original read
// by its own; and what the current format reads is canonical.
func FuzzUpgrade(f *testing.F) {
	f.Add([]byte{0xc1, 0x01, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false)
	f.Add([]byte{0xc1}, true)
	f.Add([]byte{0xc1, 0x00, 'a'}, false)
	f.Add([]byte("plain"), true)
	f.Fuzz(func(t *testing.T, v []byte, one bool) {
		from := 2
		if one {
			from = 1
		}
		up, _ := docfmt.Upgrade(from, v)
		require.Equal(t, readAs(docfmt.RulesOf(from), v), readAs(docfmt.Rules{}, up), "from %d: %x became %x", from, v, up)
		require.True(t, docfmt.Canonical(up), "%x", up)
	})
}
