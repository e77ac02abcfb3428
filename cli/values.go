package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/tipkv/tipkv/internal/mpext"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// maxDepth bounds the nesting of a decoded value, so that a hostile value
// cannot exhaust the stack.
const maxDepth = 1000

// decodeValue decodes one msgpack value that must fill data exactly, into
// something encoding/json can write:
//
//   - nil, bool, string and integers as they are;
//   - floats as numbers, except NaN and the infinities, which become the
//     strings "NaN", "+Inf" and "-Inf";
//   - bin (Go []byte) as a base64 string, the form encoding/json gives a
//     []byte, so that json.Unmarshal into a []byte gets the bytes back;
//   - maps as JSON objects in their encoded order (a Go struct's field
//     order), with non-string keys written as their JSON text;
//   - arrays as arrays; the timestamp extension as an RFC 3339 string;
//     any other extension as {"$ext": type, "$data": base64}.
//
// It fails when data is not exactly one msgpack value: truncated, with
// bytes left over, or with an unknown code.
func decodeValue(data []byte) (any, error) {
	r := bytes.NewReader(data)
	d := msgpack.NewDecoder(r)
	v, err := decodeAny(d, 0)
	if err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%d bytes left after the msgpack value", r.Len())
	}
	return v, nil
}

func decodeAny(d *msgpack.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("msgpack value nested too deep")
	}
	c, err := d.PeekCode()
	if err != nil {
		return nil, err
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.DecodeMapLen()
		if err != nil {
			return nil, err
		}
		obj := object{}
		for range n {
			k, err := decodeAny(d, depth+1)
			if err != nil {
				return nil, err
			}
			v, err := decodeAny(d, depth+1)
			if err != nil {
				return nil, err
			}
			obj = append(obj, field{mapKey(k), v})
		}
		return obj, nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.DecodeArrayLen()
		if err != nil {
			return nil, err
		}
		arr := []any{}
		for range n {
			v, err := decodeAny(d, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		return arr, nil
	case msgpcode.IsExt(c):
		raw, err := d.DecodeRaw()
		if err != nil {
			return nil, err
		}
		return decodeExt(raw)
	}
	v, err := d.DecodeInterface()
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case float32:
		return jsonFloat(float64(v)), nil
	case float64:
		return jsonFloat(v), nil
	case []byte:
		return base64.StdEncoding.EncodeToString(v), nil
	}
	return v, nil
}

// decodeExt decodes a whole extension value: its header, then its data.
func decodeExt(raw []byte) (any, error) {
	id, data := mpext.Split(raw)
	if id == -1 { // the msgpack timestamp
		var t time.Time
		if err := msgpack.Unmarshal(raw, &t); err != nil {
			return nil, err
		}
		return t.UTC().Format(time.RFC3339Nano), nil
	}
	return object{{"$ext", id}, {"$data", base64.StdEncoding.EncodeToString(data)}}, nil
}

func jsonFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return f
}

func mapKey(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	b, err := marshal(k)
	if err != nil {
		return fmt.Sprint(k)
	}
	return string(b)
}

// object is a JSON object that keeps its fields in order.
type object []field

type field struct {
	name  string
	value any
}

// MarshalJSON writes the fields in order.
func (o object) MarshalJSON() ([]byte, error) {
	buf := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			buf = append(buf, ',')
		}
		k, err := marshal(f.name)
		if err != nil {
			return nil, err
		}
		v, err := marshal(f.value)
		if err != nil {
			return nil, err
		}
		buf = append(append(append(buf, k...), ':'), v...)
	}
	return append(buf, '}'), nil
}

// marshal is json.Marshal without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// textValue reports whether b (a meta value, which is not msgpack) is
// printable UTF-8, and returns it as a string if so.
func textValue(b []byte) (string, bool) {
	if !utf8.Valid(b) {
		return "", false
	}
	for _, r := range string(b) {
		if r < 0x20 && r != '\t' && r != '\n' {
			return "", false
		}
	}
	return string(b), true
}
