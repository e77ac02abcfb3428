package codec

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Value encodes and decodes values of type T. Implementations must be safe
// for concurrent use by multiple goroutines.
type Value[T any] interface {
	// Append appends the encoding of v to dst.
	Append(dst []byte, v T) ([]byte, error)
	// Decode decodes data into v. data is only valid during the call: an
	// implementation that keeps bytes must copy them. A failure must match
	// ErrCorrupt.
	Decode(data []byte, v *T) error
}

// Msgpack is the default value codec: MessagePack through
// github.com/vmihailenco/msgpack/v5, which honours `msgpack:"name"` struct
// tags.
type Msgpack[T any] struct{}

var encoders = sync.Pool{New: func() any {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	return &pooledEncoder{enc: enc, buf: &buf}
}}

type pooledEncoder struct {
	enc *msgpack.Encoder
	buf *bytes.Buffer
}

// Append appends the msgpack encoding of v to dst.
func (Msgpack[T]) Append(dst []byte, v T) ([]byte, error) {
	e := encoders.Get().(*pooledEncoder)
	defer encoders.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return dst, fmt.Errorf("tipkv: encode %T: %w", v, err)
	}
	return append(dst, e.buf.Bytes()...), nil
}

// Decode decodes msgpack data into v.
func (Msgpack[T]) Decode(data []byte, v *T) error {
	if err := msgpack.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: msgpack into %T: %v", ErrCorrupt, v, err)
	}
	return nil
}

// Raw stores []byte values as they are. Decode copies the bytes.
type Raw struct{}

// Append appends v to dst.
func (Raw) Append(dst []byte, v []byte) ([]byte, error) { return append(dst, v...), nil }

// Decode sets *v to a new copy of data.
func (Raw) Decode(data []byte, v *[]byte) error {
	*v = append(make([]byte, 0, len(data)), data...)
	return nil
}

// String stores string values as their UTF-8 bytes.
type String struct{}

// Append appends v to dst.
func (String) Append(dst []byte, v string) ([]byte, error) { return append(dst, v...), nil }

// Decode sets *v to data as a string.
func (String) Decode(data []byte, v *string) error {
	*v = string(data)
	return nil
}
