package docfmt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Meta is the metadata of a version, event or message (tipkv.Metadata).
type Meta struct {
	Author, Reason, CorrelationID, CausationID string
	Headers                                    map[string]string
}

// The bounds of metadata: each string field and header value, each header
// key, the number of headers, and the encoded whole (MaxMetaSize).
const (
	MaxMetaField   = 1 << 10
	MaxMetaKey     = 256
	MaxMetaHeaders = 64
)

// metaV1 is the first byte of encoded metadata: its encoding's version.
const metaV1 byte = 0x01

// AppendMeta appends m encoded, after checking its bounds:
//
//	01 | author | reason | correlation id | causation id | uvarint n | n × (key | value)
//
// where each string is a uvarint length then its bytes, and the headers
// are in key order (so one Meta has one encoding).
func AppendMeta(dst []byte, m Meta) ([]byte, error) {
	for _, f := range []struct{ name, v string }{{"Author", m.Author}, {"Reason", m.Reason}, {"CorrelationID", m.CorrelationID}, {"CausationID", m.CausationID}} {
		if len(f.v) > MaxMetaField {
			return nil, fmt.Errorf("metadata %s of %d bytes is over the limit of %d", f.name, len(f.v), MaxMetaField)
		}
	}
	if len(m.Headers) > MaxMetaHeaders {
		return nil, fmt.Errorf("metadata has %d headers, over the limit of %d", len(m.Headers), MaxMetaHeaders)
	}
	start := len(dst)
	dst = append(dst, metaV1)
	for _, s := range []string{m.Author, m.Reason, m.CorrelationID, m.CausationID} {
		dst = appendStr(dst, s)
	}
	keys := make([]string, 0, len(m.Headers))
	for k, v := range m.Headers {
		if k == "" || len(k) > MaxMetaKey {
			return nil, fmt.Errorf("metadata header key of %d bytes: 1 to %d", len(k), MaxMetaKey)
		}
		if len(v) > MaxMetaField {
			return nil, fmt.Errorf("metadata header %q of %d bytes is over the limit of %d", k, len(v), MaxMetaField)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, k := range keys {
		dst = appendStr(appendStr(dst, k), m.Headers[k])
	}
	if n := len(dst) - start; n > MaxMetaSize {
		return nil, fmt.Errorf("metadata of %d bytes encoded is over the limit of %d", n, MaxMetaSize)
	}
	return dst, nil
}

func appendStr(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

var errMeta = errors.New("metadata does not decode")

// ParseMeta decodes metadata AppendMeta encoded.
func ParseMeta(b []byte) (Meta, error) {
	if len(b) == 0 || b[0] != metaV1 {
		return Meta{}, errMeta
	}
	b = b[1:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var m Meta
	for _, p := range []*string{&m.Author, &m.Reason, &m.CorrelationID, &m.CausationID} {
		s, ok := str()
		if !ok {
			return Meta{}, errMeta
		}
		*p = s
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > MaxMetaHeaders {
		return Meta{}, errMeta
	}
	b = b[k:]
	if n > 0 {
		m.Headers = make(map[string]string, n)
	}
	for range n {
		key, ok1 := str()
		val, ok2 := str()
		if !ok1 || !ok2 {
			return Meta{}, errMeta
		}
		m.Headers[key] = val
	}
	if len(b) != 0 {
		return Meta{}, errMeta
	}
	return m, nil
}
