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

func TestHeader(t *testing.T) {
	v := append(docfmt.AppendHeader(nil, 1234), "doc"...)
	require.Len(t, v, docfmt.HeaderSize+3)
	doc, exp := docfmt.Split(v)
	require.Equal(t, "doc", string(doc))
	require.EqualValues(t, 1234, exp)
	require.False(t, docfmt.IsDeleteMarker(v))
	require.True(t, docfmt.Reserved(v))
	require.False(t, docfmt.Expired(v, 1233))
	require.True(t, docfmt.Expired(v, 1234))

	_, exp = docfmt.Split(docfmt.AppendHeader(nil, -5))
	require.EqualValues(t, 1, exp, "an expiry is never 0, which means none")
	for _, plain := range [][]byte{nil, {0xc1}, {0xc1, 0x01}, {0xc1, 0x01, 1, 2, 3}, {0xc1, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 'x'}, []byte("{}")} {
		doc, exp := docfmt.Split(plain)
		require.Equal(t, plain, doc, "%x", plain)
		require.Zero(t, exp)
		require.False(t, docfmt.Expired(plain, 1<<62))
	}
}

func FuzzSplit(f *testing.F) {
	f.Add([]byte{0xc1, 0x01, 0, 0, 0, 0, 0, 0, 0, 9, 'x'})
	f.Add([]byte{0xc1})
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, v []byte) {
		doc, exp := docfmt.Split(v)
		if exp == 0 {
			require.Equal(t, v, doc)
			return
		}
		require.Equal(t, v, append(docfmt.AppendHeader(nil, exp), doc...))
	})
}
