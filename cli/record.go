package cli

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/docfmt"
)

// record is one key and its value, each decoded by the key's family.
type record struct {
	key key
	// raw is the value as stored.
	raw []byte
	// header holds the fields that precede a value's payload (a queue
	// item's attempts and times), or that are the whole value (a queue
	// state's head and tail, a feed cursor's position).
	header object
	// headerOnly says the family's values have no payload: header is the
	// whole value.
	headerOnly bool
	// value is the payload decoded from msgpack (or JSON), or why it did
	// not decode.
	value decoded
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
	switch k.fam.Family {
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
		tag, when := byte(queueItemTag), "visible_at"
		if k.fam.Family == codec.FamilyDeadLetters {
			tag, when = queueDeadTag, "dead_at"
		}
		if k.fam.Family == codec.FamilyDeadLetters && len(v) > 0 && v[0] == queueDeadRawTag {
			r.bad = "a corrupt queue message, quarantined in the dead-letter queue (tipkv queue --discard deletes it)"
			return r
		}
		h, payload, err := parseQueueValue(v, tag)
		if err != nil {
			r.bad = "queue value: " + err.Error()
			return r
		}
		r.header = object{{"attempts", h.attempts}, {"enqueued", unixTime(h.enqueued)}, {when, unixTime(h.at)}}
		if h.group != "" {
			r.header = append(r.header, field{"group", h.group})
		}
		r.value = decode(payload)
	case codec.FamilyQueueState:
		st, err := parseQueueState(v)
		if err != nil {
			r.bad = "queue state: " + err.Error()
			return r
		}
		r.header, r.headerOnly = object{{"head", st.head}, {"tail", st.tail}}, true
	case codec.FamilyQueueControl:
		qc, err := parseQueueControl(v)
		if err != nil {
			r.bad = "queue control: " + err.Error()
			return r
		}
		r.header, r.headerOnly = object{{"paused", qc.paused}, {"max_in_flight", qc.maxInFlight}}, true
		if qc.leases >= 0 {
			r.header = append(r.header, field{"leases_counted", qc.leases})
		}
	case codec.FamilyFeedCursors:
		if len(v) != codec.NumberSize {
			r.bad = fmt.Sprintf("cursor of %d bytes, want %d", len(v), codec.NumberSize)
			return r
		}
		pos, _, _ := codec.DecodeAsc(v)
		r.header, r.headerOnly = object{{"position", pos}}, true
	case codec.FamilyFeedLeases:
		// asc(deadline) | member: versioned's leases.go.
		if len(v) <= codec.NumberSize {
			r.bad = fmt.Sprintf("lease of %d bytes, want %d and a member name", len(v), codec.NumberSize)
			return r
		}
		d, _, _ := codec.DecodeAsc(v)
		r.header, r.headerOnly = object{{"member", string(v[codec.NumberSize:])}, {"deadline", unixTime(d)}}, true
	case codec.FamilyPurges:
		// The time is the key's number; the value is empty: versioned's
		// horizon.go.
		if len(v) != 0 {
			r.bad = fmt.Sprintf("purge horizon with a %d-byte value, want none", len(v))
			return r
		}
		r.header, r.headerOnly = object{{"horizon", unixTime(k.num)}}, true
	case codec.FamilyTimeIndex:
		// versioned's timeindex.go: an entry's value is asc(version); the
		// key with the empty id holds the index's state.
		if len(k.segs) > 1 && len(k.segs[1]) == 0 {
			if len(v) != 1 || (v[0] != 1 && v[0] != 2) {
				r.bad = fmt.Sprintf("time index state %x, want 01 (building) or 02 (on)", v)
				return r
			}
			r.header, r.headerOnly = object{{"index", map[byte]string{1: "building", 2: "on"}[v[0]]}}, true
			return r
		}
		if len(v) != codec.NumberSize {
			r.bad = fmt.Sprintf("time index entry of %d bytes, want %d", len(v), codec.NumberSize)
			return r
		}
		ver, _, _ := codec.DecodeAsc(v)
		r.header, r.headerOnly = object{{"time", unixTime(k.num)}, {"version", ver}}, true
	case codec.FamilyVersions:
		ver := fm.Parse(v)
		if ver.Time != 0 {
			r.header = append(r.header, field{"time", unixTime(ver.Time)})
		}
		if ver.Meta != nil {
			r.header = append(r.header, field{"meta", rawMetaObject(ver.Meta)})
		}
		r.value = decodeVersion(v, fm)
	default: // feed
		if k.num == 0 {
			// Position 0 holds no event but the stream's trim mark,
			// asc(position): versioned's feed_mark.go.
			if len(v) != codec.NumberSize {
				r.bad = fmt.Sprintf("trim mark of %d bytes, want %d", len(v), codec.NumberSize)
				return r
			}
			m, _, _ := codec.DecodeAsc(v)
			r.header, r.headerOnly = object{{"trim_mark", m}, {"time", unixTime(m)}}, true
			return r
		}
		ev, meta := fm.ParseEvent(v)
		if meta != nil {
			r.header = append(r.header, field{"meta", rawMetaObject(meta)})
		}
		r.value = decode(ev)
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

// cells renders the record as a row of dump's table: its family, its key,
// its value; with raw, the key and the value in hex.
func (r record) cells(raw bool) []any {
	if raw {
		return []any{familyName(r.key.raw0()), "0x" + hex.EncodeToString(r.key.raw), hexCell(r.raw)}
	}
	return []any{familyName(r.key.raw0()), r.key.text(), r.valueText()}
}

// valueText renders the value for a table: header fields, then the value,
// or the raw bytes in hex and why they do not decode.
func (r record) valueText() string {
	switch {
	case !r.key.complete():
		return hexCell(r.raw)
	case r.bad != "":
		return truncate(hexCell(r.raw) + " (" + r.bad + ")")
	case r.headerOnly:
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
	case !r.headerOnly:
		obj = append(obj, r.value.fields()...)
	}
	if raw {
		obj = append(obj, valueHex)
	}
	return obj
}

// rawMetaObject renders a version's encoded metadata for JSON, or the
// error it does not decode with and its bytes.
func rawMetaObject(b []byte) any {
	m, err := docfmt.ParseMeta(b)
	if err != nil {
		return object{{"error", err.Error()}, {"hex", fmt.Sprintf("%x", b)}}
	}
	v := docVersion{meta: &tipkv.Metadata{Author: m.Author, Reason: m.Reason, CorrelationID: m.CorrelationID, CausationID: m.CausationID, Headers: m.Headers}}
	return v.metaObject()
}
