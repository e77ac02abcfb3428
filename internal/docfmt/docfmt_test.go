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
