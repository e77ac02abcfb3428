package docfmt

import (
	"bytes"
	"encoding/binary"
)

// Feed events. From store format 4 on, an event's stored value is one of
//
//	event                                    an event without metadata whose
//	                                         encoding does not start with C1
//	C1 00 | event                            one whose encoding does (escaped)
//	C1 20 | uvarint n | metadata (n) | event an event with metadata
//
// where event is the event encoded by the feed's codec and metadata is
// AppendMeta's encoding, at most MaxMetaSize bytes. An event costs nothing
// for the header unless it has metadata (or its encoding starts with C1,
// which msgpack, JSON and UTF-8 text never do). The event's time is its
// key's position; no header holds it. A C1 value that matches neither
// form reads as the event, as such a document value does: format 4 never
// writes one.
//
// Formats 1 to 3 stored the encoding alone, whatever its first byte: the
// upgrade to format 4 escapes every event value that starts with C1
// (UpgradeEvent), so that each reads as it did.

// eventMetaTag is the tag of an event header with metadata.
const eventMetaTag byte = 0x20

// AppendEvent appends the stored value of the encoded event ev with the
// encoded metadata meta (nil: none). It returns ev itself, without
// copying, when the value is the encoding alone.
func AppendEvent(dst, meta, ev []byte) []byte {
	switch {
	case meta != nil:
		dst = append(dst, DeleteMarker, eventMetaTag)
		dst = binary.AppendUvarint(dst, uint64(len(meta)))
		dst = append(dst, meta...)
	case len(ev) > 0 && ev[0] == DeleteMarker:
		dst = append(dst, DeleteMarker, escapeTag)
	default:
		if dst == nil {
			return ev
		}
	}
	return append(dst, ev...)
}

// ParseEvent takes apart v, an event's stored value read by the rules r:
// the encoded event and its encoded metadata (nil for none), aliasing v.
func (r Rules) ParseEvent(v []byte) (ev, meta []byte) {
	if r.old != 0 || len(v) < 2 || v[0] != DeleteMarker {
		return v, nil
	}
	switch v[1] {
	case escapeTag:
		return v[2:], nil
	case eventMetaTag:
		rest := v[2:]
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) || n > MaxMetaSize {
			return v, nil
		}
		return rest[k+int(n):], rest[k : k+int(n) : k+int(n)]
	}
	return v, nil
}

// ParseEvent is ParseEvent by the current format's rules.
func ParseEvent(v []byte) (ev, meta []byte) { return Rules{}.ParseEvent(v) }

// UpgradeEvent returns the stored value an event stored as v by store
// format from has in the current format, and whether it differs: from
// formats 1 to 3, a value that starts with C1 is escaped. Escaping is not
// idempotent: each value must be upgraded exactly once.
func UpgradeEvent(from int, v []byte) (upgraded []byte, changed bool) {
	if from >= TimeFormat || len(v) == 0 || v[0] != DeleteMarker {
		return v, false
	}
	out := make([]byte, 0, len(v)+2)
	return append(append(out, DeleteMarker, escapeTag), v...), true
}

// CanonicalEvent reports whether v, an event's stored value of the current
// format, has the form the format writes (AppendEvent, UpgradeEvent): a
// value that starts with C1 is the escape of an event that starts with C1
// or a header with metadata of at most MaxMetaSize bytes, its length in
// the fewest bytes.
func CanonicalEvent(v []byte) bool {
	if len(v) == 0 || v[0] != DeleteMarker {
		return true
	}
	ev, meta := ParseEvent(v)
	if len(ev) == len(v) {
		return false // no form matched: read as the event
	}
	return bytes.Equal(AppendEvent(nil, meta, ev), v)
}
