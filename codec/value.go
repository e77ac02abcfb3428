package codec

import (
	"bytes"
	"encoding/json"
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
// github.com/vmihailenco/msgpack/v5. A struct field is stored under the
// name in its `msgpack:"name"` tag; without one, under the name in its
// `json:"name"` tag; without either, under its Go name. See "Field names"
// in the package doc for what that means for data already stored.
//
// The zero value is ready to use and safe for concurrent use.
type Msgpack[T any] struct {
	// IgnoreJSONTags names fields by their msgpack tag or their Go name
	// only, ignoring json tags: the naming of tipkv before json tags were
	// honoured. A store whose values were written with that naming must
	// keep reading them with it: a field with a json tag but no msgpack
	// tag was stored under its Go name.
	IgnoreJSONTags bool
}

// jsonTag is the struct tag msgpack falls back to when a field has no
// msgpack tag.
const jsonTag = "json"

// structTag is the fallback tag of c for msgpack: "json", or "" for none.
func (c Msgpack[T]) structTag() string {
	if c.IgnoreJSONTags {
		return ""
	}
	return jsonTag
}

// A msgpack encoder and decoder are kept in pools, so that a call
// allocates nothing of its own beyond what msgpack needs for the value.
var (
	msgpackEncoders = sync.Pool{New: func() any {
		e := &msgpackEncoder{}
		e.enc = msgpack.NewEncoder(&e.buf)
		return e
	}}
	msgpackDecoders = sync.Pool{New: func() any {
		d := &msgpackDecoder{}
		d.dec = msgpack.NewDecoder(&d.r)
		d.dec.UsePreallocateValues(true) // as msgpack.Unmarshal does
		return d
	}}
)

type msgpackEncoder struct {
	enc *msgpack.Encoder
	buf bytes.Buffer
}

type msgpackDecoder struct {
	dec *msgpack.Decoder
	r   bytes.Reader
}

// Append appends the msgpack encoding of v to dst.
func (c Msgpack[T]) Append(dst []byte, v T) ([]byte, error) {
	e := msgpackEncoders.Get().(*msgpackEncoder)
	defer msgpackEncoders.Put(e)
	e.buf.Reset()
	e.enc.SetCustomStructTag(c.structTag())
	if err := e.enc.Encode(v); err != nil {
		return dst, fmt.Errorf("%w: encode %T: %w", ErrInvalid, v, err)
	}
	return append(dst, e.buf.Bytes()...), nil
}

// Decode decodes msgpack data into v. Bytes after the first msgpack value
// are ignored.
func (c Msgpack[T]) Decode(data []byte, v *T) error {
	d := msgpackDecoders.Get().(*msgpackDecoder)
	d.r.Reset(data)
	d.dec.ResetReader(&d.r) // keeps the flags and the struct tag
	d.dec.SetCustomStructTag(c.structTag())
	err := d.dec.Decode(v)
	d.r.Reset(nil) // the pool must not keep the caller's bytes
	if err != nil {
		// Not put back: a decoder that failed halfway may keep state (a
		// half-recorded raw value) into its next use.
		return fmt.Errorf("%w: msgpack into %T: %v", ErrCorrupt, v, err)
	}
	msgpackDecoders.Put(d)
	return nil
}

// JSON is a value codec that stores values as JSON through encoding/json,
// with its rules: `json:"name"` tags, case-insensitive field names on
// decode, []byte as base64, no NaN or infinities. It is larger and slower
// than [Msgpack], and readable by any tool. HTML characters are not
// escaped.
//
// The zero value is ready to use and safe for concurrent use.
type JSON[T any] struct{}

var jsonEncoders = sync.Pool{New: func() any {
	e := &jsonEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

type jsonEncoder struct {
	enc *json.Encoder
	buf bytes.Buffer
}

// Append appends the JSON encoding of v to dst, without a trailing newline.
func (JSON[T]) Append(dst []byte, v T) ([]byte, error) {
	e := jsonEncoders.Get().(*jsonEncoder)
	defer jsonEncoders.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return dst, fmt.Errorf("%w: encode %T: %w", ErrInvalid, v, err)
	}
	b := e.buf.Bytes()
	return append(dst, b[:len(b)-1]...), nil // Encode ends with a newline
}

// Decode decodes JSON data into v. data must hold one JSON value.
func (JSON[T]) Decode(data []byte, v *T) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: json into %T: %v", ErrCorrupt, v, err)
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
