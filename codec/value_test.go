package codec_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
)

type order struct {
	ID    string  `msgpack:"id"`
	Total float64 `msgpack:"total"`
	Items []string
}

func TestMsgpackRoundTrip(t *testing.T) {
	var c codec.Value[order] = codec.Msgpack[order]{}
	in := order{ID: "o1", Total: 9.5, Items: []string{"a", "b"}}
	data, err := c.Append([]byte("prefix"), in)
	require.NoError(t, err)
	require.Equal(t, "prefix", string(data[:6]), "Append appends")
	var out order
	require.NoError(t, c.Decode(data[6:], &out))
	require.Equal(t, in, out)
}

func TestMsgpackDecodeFailureIsCorrupt(t *testing.T) {
	var out order
	err := codec.Msgpack[order]{}.Decode([]byte{0xc1}, &out) // 0xc1 is never used in msgpack
	require.ErrorIs(t, err, codec.ErrCorrupt)
	var n int
	data, err := codec.Msgpack[string]{}.Append(nil, "text")
	require.NoError(t, err)
	require.ErrorIs(t, codec.Msgpack[int]{}.Decode(data, &n), codec.ErrCorrupt)
}

func TestMsgpackEncodeFailure(t *testing.T) {
	_, err := codec.Msgpack[chan int]{}.Append(nil, make(chan int))
	require.Error(t, err)
}

func TestRawCopies(t *testing.T) {
	src := []byte("hello")
	var v []byte
	require.NoError(t, codec.Raw{}.Decode(src, &v))
	src[0] = 'J'
	require.Equal(t, "hello", string(v), "Decode must copy")
	out, err := codec.Raw{}.Append(nil, v)
	require.NoError(t, err)
	require.Equal(t, "hello", string(out))
	var s string
	require.NoError(t, codec.String{}.Decode([]byte("x"), &s))
	require.Equal(t, "x", s)
}
