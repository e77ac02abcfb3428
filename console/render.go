package console

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/mpext"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// A Renderer turns the stored bytes of a value (what its codec wrote:
// tipkv's own headers, delete markers and expiry, are taken off first)
// into JSON for the console. It must be safe for concurrent use, and
// must not keep raw after it returns. When it fails, the console shows
// the value as text or hex, with the error.
type Renderer func(raw []byte) (json.RawMessage, error)

// CodecRenderer returns a Renderer that decodes a value with c into a T,
// and writes the T as encoding/json does: for a collection, stream or
// queue whose values are T, stored with c.
func CodecRenderer[T any](c codec.Value[T]) Renderer {
	return func(raw []byte) (json.RawMessage, error) {
		var v T
		if err := c.Decode(raw, &v); err != nil {
			return nil, err
		}
		return json.Marshal(v)
	}
}

// MsgpackRenderer is the default Renderer, for values stored with tipkv's
// default codec (codec.Msgpack): it decodes one msgpack value, whatever
// Go type wrote it, into JSON. Maps keep their encoded order (a struct's
// field order) and non-string keys become their JSON text; bin is base64,
// as encoding/json writes a []byte; the timestamp extension is an RFC 3339
// string, other extensions {"$ext": type, "$data": base64}; NaN and the
// infinities are the strings "NaN", "+Inf" and "-Inf". Bytes that are not
// exactly one msgpack value are an error.
func MsgpackRenderer(raw []byte) (json.RawMessage, error) {
	r := bytes.NewReader(raw)
	d := msgpack.NewDecoder(r)
	var buf bytes.Buffer
	if err := writeMsgpack(&buf, d, 0); err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%d bytes left after the msgpack value", r.Len())
	}
	return buf.Bytes(), nil
}

// maxDepth bounds the nesting of a decoded value, so that a hostile value
// cannot exhaust the stack.
const maxDepth = 1000

func writeMsgpack(buf *bytes.Buffer, d *msgpack.Decoder, depth int) error {
	if depth > maxDepth {
		return errors.New("msgpack value nested too deep")
	}
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.DecodeMapLen()
		if err != nil {
			return err
		}
		buf.WriteByte('{')
		var key bytes.Buffer
		for i := range n {
			if i > 0 {
				buf.WriteByte(',')
			}
			key.Reset()
			kc, err := d.PeekCode()
			if err != nil {
				return err
			}
			if msgpcode.IsString(kc) {
				if err := writeMsgpack(buf, d, depth+1); err != nil {
					return err
				}
			} else {
				// A key that is not a string: its JSON text, as a string.
				if err := writeMsgpack(&key, d, depth+1); err != nil {
					return err
				}
				writeString(buf, key.String())
			}
			buf.WriteByte(':')
			if err := writeMsgpack(buf, d, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.DecodeArrayLen()
		if err != nil {
			return err
		}
		buf.WriteByte('[')
		for i := range n {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeMsgpack(buf, d, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case msgpcode.IsExt(c):
		raw, err := d.DecodeRaw()
		if err != nil {
			return err
		}
		return writeExt(buf, raw)
	}
	v, err := d.DecodeInterface()
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(v))
	case string:
		writeString(buf, v)
	case []byte:
		writeString(buf, base64.StdEncoding.EncodeToString(v))
	case float32:
		writeFloat(buf, float64(v), 32)
	case float64:
		writeFloat(buf, v, 64)
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		fmt.Fprint(buf, v)
	default:
		return fmt.Errorf("msgpack code %#x: unexpected %T", c, v)
	}
	return nil
}

// writeExt writes a whole extension value: its header, then its data.
func writeExt(buf *bytes.Buffer, raw []byte) error {
	id, data := mpext.Split(raw)
	if id == -1 { // the msgpack timestamp
		var t time.Time
		if err := msgpack.Unmarshal(raw, &t); err != nil {
			return err
		}
		writeString(buf, t.UTC().Format(time.RFC3339Nano))
		return nil
	}
	fmt.Fprintf(buf, `{"$ext":%d,"$data":`, id)
	writeString(buf, base64.StdEncoding.EncodeToString(data))
	buf.WriteByte('}')
	return nil
}

func writeFloat(buf *bytes.Buffer, f float64, bits int) {
	switch {
	case math.IsNaN(f):
		buf.WriteString(`"NaN"`)
	case math.IsInf(f, 1):
		buf.WriteString(`"+Inf"`)
	case math.IsInf(f, -1):
		buf.WriteString(`"-Inf"`)
	default:
		b, _ := json.Marshal(f) // a finite float always marshals
		if bits == 32 {
			b = strconv.AppendFloat(nil, f, 'g', -1, 32)
		}
		buf.Write(b)
	}
}

// writeString writes s as a JSON string; invalid UTF-8 becomes U+FFFD, as
// encoding/json writes it.
func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}

// Value is a stored value as the console shows it: as JSON when its
// Renderer renders it and it fits, else as text or hex. Size is what it
// takes in the store (without tipkv's headers).
type Value struct {
	Size int `json:"size"`
	// JSON is the rendered value, at most Options.MaxValueBytes of it.
	JSON json.RawMessage `json:"json,omitempty"`
	// Text is the value as UTF-8 text, when it does not render as JSON
	// and is printable text; or the start of a rendering too long to
	// show whole (Truncated).
	Text string `json:"text,omitempty"`
	// Hex is the value in hex, when it is neither JSON nor text: at most
	// MaxValueBytes/2 bytes of it (Truncated).
	Hex string `json:"hex,omitempty"`
	// Truncated says that JSON, Text or Hex shows only the start.
	Truncated bool `json:"truncated,omitempty"`
	// Error says why the renderer failed, when it did.
	Error string `json:"error,omitempty"`
}

// renderValue renders raw with r (MsgpackRenderer if nil), at most limit
// bytes of JSON. A raw value so large that its JSON cannot fit (over 4 x
// limit) is not decoded: its start is shown in hex.
func renderValue(r Renderer, raw []byte, limit int) Value {
	v := Value{Size: len(raw)}
	if len(raw) > 4*limit {
		v.Error = fmt.Sprintf("%d bytes: too large to render here (the limit is %d)", len(raw), 4*limit)
		v.Hex, v.Truncated = hex.EncodeToString(raw[:limit/2]), true
		return v
	}
	if r == nil {
		r = MsgpackRenderer
	}
	js, err := safeRender(r, raw)
	if err == nil && !json.Valid(js) {
		err = errors.New("the renderer wrote invalid JSON")
	}
	if err == nil {
		if len(js) <= limit {
			v.JSON = js
			return v
		}
		v.Text, v.Truncated = truncateUTF8(string(js), limit), true
		return v
	}
	// Not rendered: JSON as stored (codec.JSON), text, or hex.
	if json.Valid(raw) {
		if len(raw) <= limit {
			v.JSON = bytes.Clone(raw)
		} else {
			v.Text, v.Truncated = truncateUTF8(string(raw), limit), true
		}
		return v
	}
	v.Error = err.Error()
	if s, ok := printable(raw); ok {
		if len(s) > limit {
			s, v.Truncated = truncateUTF8(s, limit), true
		}
		v.Text = s
		return v
	}
	if len(raw) > limit/2 {
		raw, v.Truncated = raw[:limit/2], true
	}
	v.Hex = hex.EncodeToString(raw)
	return v
}

// safeRender calls r, turning a panic of a service's renderer into an
// error.
func safeRender(r Renderer, raw []byte) (js json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			js, err = nil, fmt.Errorf("the renderer panicked: %v", p)
		}
	}()
	return r(raw)
}

// printable reports whether b is UTF-8 text without control characters
// other than tab, newline and carriage return.
func printable(b []byte) (string, bool) {
	if len(b) == 0 || !utf8.Valid(b) {
		return "", false
	}
	for _, r := range string(b) {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			return "", false
		}
	}
	return string(b), true
}

// truncateUTF8 cuts s to at most n bytes, at a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Pretty returns the value as people read it: JSON indented, else its text
// or hex.
func (v Value) Pretty() string {
	switch {
	case v.JSON != nil:
		var buf bytes.Buffer
		if err := json.Indent(&buf, v.JSON, "", "  "); err != nil {
			return string(v.JSON)
		}
		return buf.String()
	case v.Text != "":
		return v.Text
	}
	return v.Hex
}
