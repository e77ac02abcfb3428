package codec_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/vmihailenco/msgpack/v5"
)

type order struct {
	ID    string  `msgpack:"id"`
	Total float64 `msgpack:"total"`
	Items []string
}

// valueCodecs are the struct codecs every generic test runs against.
func valueCodecs[T any]() map[string]codec.Value[T] {
	return map[string]codec.Value[T]{
		"msgpack":                codec.Msgpack[T]{},
		"msgpack,IgnoreJSONTags": codec.Msgpack[T]{IgnoreJSONTags: true},
		"json":                   codec.JSON[T]{},
	}
}

func TestValueRoundTrip(t *testing.T) {
	for name, c := range valueCodecs[order]() {
		in := order{ID: "o1", Total: 9.5, Items: []string{"a", "b"}}
		data, err := c.Append([]byte("prefix"), in)
		require.NoError(t, err, name)
		require.Equal(t, "prefix", string(data[:6]), "%s: Append appends", name)
		var out order
		require.NoError(t, c.Decode(data[6:], &out), name)
		require.Equal(t, in, out, name)
	}
}

func TestValueDecodeFailureIsCorrupt(t *testing.T) {
	for name, c := range valueCodecs[order]() {
		var out order
		err := c.Decode([]byte{0xc1}, &out) // 0xc1 is never used in msgpack, nor valid JSON
		require.ErrorIs(t, err, codec.ErrCorrupt, name)
	}
	var n int
	data, err := codec.Msgpack[string]{}.Append(nil, "text")
	require.NoError(t, err)
	require.ErrorIs(t, codec.Msgpack[int]{}.Decode(data, &n), codec.ErrCorrupt)
	require.ErrorIs(t, codec.JSON[int]{}.Decode([]byte(`"text"`), &n), codec.ErrCorrupt)
}

// A decoder that failed is not reused in a state that breaks the next
// decode.
func TestMsgpackDecodeAfterFailure(t *testing.T) {
	c := codec.Msgpack[order]{}
	good, err := c.Append(nil, order{ID: "o2", Total: 1})
	require.NoError(t, err)
	for range 100 {
		var out order
		require.Error(t, c.Decode(good[:len(good)-3], &out), "truncated")
		out = order{}
		require.NoError(t, c.Decode(good, &out))
		require.Equal(t, "o2", out.ID)
	}
}

func TestValueEncodeFailure(t *testing.T) {
	_, err := codec.Msgpack[chan int]{}.Append(nil, make(chan int))
	require.Error(t, err)
	_, err = codec.JSON[chan int]{}.Append(nil, make(chan int))
	require.Error(t, err)
}

func TestJSONIsPlainJSON(t *testing.T) {
	type page struct {
		Title string `json:"title"`
		Body  string `json:"body,omitempty"`
		Raw   []byte
	}
	data, err := codec.JSON[page]{}.Append(nil, page{Title: "<a & b>", Raw: []byte{1, 2}})
	require.NoError(t, err)
	require.Equal(t, `{"title":"<a & b>","Raw":"AQI="}`, string(data), "no HTML escaping, no newline")
}

// Encoding reuses pooled encoders: beyond boxing the value, a call
// allocates nothing; decoding a flat struct allocates nothing either.
func TestValueAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	type flat struct {
		N int     `json:"n"`
		F float64 `msgpack:"f"`
		B bool
	}
	for _, c := range []codec.Msgpack[flat]{{}, {IgnoreJSONTags: true}} {
		buf := make([]byte, 0, 64)
		v := flat{N: 5, F: 1.5, B: true}
		enc := testing.AllocsPerRun(1000, func() {
			var err error
			if buf, err = c.Append(buf[:0], v); err != nil {
				t.Fatal(err)
			}
		})
		require.LessOrEqual(t, enc, 1.0, "IgnoreJSONTags=%v: encode allocations", c.IgnoreJSONTags)
		var out flat
		dec := testing.AllocsPerRun(1000, func() {
			if err := c.Decode(buf, &out); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, dec, "IgnoreJSONTags=%v: decode allocations", c.IgnoreJSONTags)
		require.Equal(t, v, out)
	}
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

// storedNames returns the field names v is stored under by c.
func storedNames[T any](t *testing.T, c codec.Msgpack[T], v T) []string {
	t.Helper()
	data, err := c.Append(nil, v)
	require.NoError(t, err)
	dec := msgpack.NewDecoder(bytesReader(data))
	n, err := dec.DecodeMapLen()
	require.NoError(t, err)
	var names []string
	for range n {
		k, err := dec.DecodeString()
		require.NoError(t, err)
		names = append(names, k)
		require.NoError(t, dec.Skip())
	}
	return names
}

// A value msgpack or JSON cannot encode is bad input: ErrInvalid.
func TestEncodeErrorIsInvalid(t *testing.T) {
	type bad struct{ C chan int }
	_, err := codec.Msgpack[bad]{}.Append(nil, bad{C: make(chan int)})
	require.ErrorIs(t, err, codec.ErrInvalid)
	_, err = codec.JSON[bad]{}.Append(nil, bad{C: make(chan int)})
	require.ErrorIs(t, err, codec.ErrInvalid)
}
