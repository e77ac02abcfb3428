package docfmt_test

import (
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
