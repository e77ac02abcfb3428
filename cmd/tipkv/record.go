package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/docfmt"
)

// record is one key and its value, each decoded by the key's family.
type record struct {
	key key
	// raw is the value as stored.
	raw []byte
	// header holds the fields that precede a value's payload: a queue
	// item's attempts and times, a queue state's head and tail.
	header object
	// value is the payload decoded from msgpack (or JSON), or why it did
	// not decode.
	value decoded
	// msgpack says whether the family's values are msgpack, so that a value
	// that does not decode is a problem. Meta values and keys of unknown
	// families are not.
	msgpack bool
	// bad says why the value does not have its family's format: a queue
	// header or state that does not parse, a format key that is not a
	// number. "" when it does.
	bad string
}

var formatName = []byte("format")

// decodeRecord decodes k's value v by k's family, a document version by the
// rules fm of the store's format. k and v are copied.
func decodeRecord(k key, v []byte, fm docfmt.Rules) record {
	v = bytes.Clone(v)
	r := record{key: k, raw: v}
	if k.fam == nil || !k.complete() {
		return r
	}
	switch k.fam.id {
	case codec.FamilyMeta:
		if txt, ok := textValue(v); ok {
			r.value = decoded{value: txt, raw: v}
		} else {
			r.value = decode(v)
		}
		if bytes.Equal(k.segs[0], formatName) {
			if _, err := strconv.Atoi(string(v)); err != nil {
				r.bad = fmt.Sprintf("format key holds %q, not a number", v)
			}
		}
	case codec.FamilyQueueItems, codec.FamilyDeadLetters:
		r.msgpack = true
		tag, when := byte(queueItemTag), "visible_at"
		if k.fam.id == codec.FamilyDeadLetters {
			tag, when = queueDeadTag, "dead_at"
		}
		if k.fam.id == codec.FamilyDeadLetters && len(v) > 0 && v[0] == queueDeadRawTag {
			r.bad = "a corrupt queue message, quarantined in the dead-letter queue (tipkv queue --discard deletes it)"
			return r
		}
		h, payload, err := parseQueueValue(v, tag)
		if err != nil {
			r.bad = "queue value: " + err.Error()
			return r
		}
		r.header = object{{"attempts", h.attempts}, {"enqueued", unixTime(h.enqueued)}, {when, unixTime(h.at)}}
		r.value = decode(payload)
	case codec.FamilyQueueState:
		st, err := parseQueueState(v)
		if err != nil {
			r.bad = "queue state: " + err.Error()
			return r
		}
		r.header = object{{"head", st.head}, {"tail", st.tail}}
	case codec.FamilyVersions:
		r.msgpack = true
		ver := fm.Parse(v)
		if ver.Time != 0 {
			r.header = append(r.header, field{"time", unixTime(ver.Time)})
		}
		if ver.Meta != nil {
			r.header = append(r.header, field{"meta", metaObject(ver.Meta)})
		}
		if ver.Deleted && len(v) > 1 {
			r.header = append(r.header, field{"deleted", true})
			return r
		}
		r.value = decodeDoc(v, fm)
	default: // feed
		r.msgpack = true
		r.value = decode(v)
	}
	return r
}

// unixTime renders Unix nanoseconds as a UTC time, or nil for 0 (never).
func unixTime(ns int64) any {
	if ns == 0 {
		return nil
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// valueText renders the value for a table: header fields, then the value,
// or the raw bytes in hex and why they do not decode.
func (r record) valueText() string {
	switch {
	case !r.key.complete():
		return hexCell(r.raw)
	case r.bad != "":
		return truncate(hexCell(r.raw) + " (" + r.bad + ")")
	case r.key.fam.id == codec.FamilyQueueState:
		return valueCell(r.header)
	case len(r.header) > 0:
		return truncate(valueCell(r.header) + " " + r.value.cell())
	}
	return r.value.cell()
}

// fields renders the record for JSON. With raw, the key's and the value's
// bytes are added in hex; they are always there for a key or value that
// does not decode.
func (r record) fields(raw bool) object {
	obj := r.key.fields()
	if raw || !r.key.complete() {
		obj = append(obj, field{"key_hex", hex.EncodeToString(r.key.raw)})
	}
	valueHex := field{"value_hex", hex.EncodeToString(r.raw)}
	switch {
	case !r.key.complete():
		return append(obj, field{"key_error", r.key.bad}, valueHex)
	case r.bad != "":
		return append(obj, valueHex, field{"value_error", r.bad})
	}
	obj = append(obj, r.header...)
	switch {
	case r.value.err != nil:
		return append(obj, valueHex, field{"value_error", r.value.err.Error()})
	case r.key.fam.id != codec.FamilyQueueState:
		obj = append(obj, r.value.fields()...)
	}
	if raw {
		obj = append(obj, valueHex)
	}
	return obj
}
