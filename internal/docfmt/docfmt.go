// Package docfmt holds the details of the document value format that tools
// must know besides the codec: the delete marker, the escape and the
// expiry header. Package versioned writes them, the root package's
// upgrade rewrites the values of older formats into them, and cmd/tipkv
// and internal/check read them; nothing else may depend on them.
//
// A version's stored value is one of:
//
//   - the single byte C1: a delete marker, written by Collection.Delete as
//     the next version of the document;
//   - C1 01 | expiry (8 bytes, big-endian Unix nanoseconds, at least 1) |
//     the document encoded by the codec: a version with a time to live
//     (Options.TTL), which reads as gone from its expiry on;
//   - C1 00 | the document encoded by the codec: an encoding that starts
//     with C1 itself (possible with raw or string codecs), escaped so that
//     it is never taken for a marker or a header;
//   - anything else: the document encoded by the codec.
//
// 0xC1 is the one byte msgpack never produces ("never used"), and no JSON
// or UTF-8 text starts with it, so the values of the usual codecs are
// stored as they are.
//
// # Older formats
//
// Store format 1 had no delete marker, header or escape: every value was
// the document, the single byte C1 included. Format 2 added the delete
// marker and refused only the single byte C1 as a document, so raw or
// string codecs could store documents that start with C1 00, or with
// C1 01 and 8 more bytes, which format 3 reads as escaped or expiring.
// When tipkv.Open upgrades a store of format 1 or 2, it rewrites every
// document value that starts with C1 (format 2's delete markers aside) as
// Upgrade says, C1 00 | value, before anything reads the store: each reads
// by format 3 as it read by its own format, and the store then holds only
// values format 3 writes (Canonical). A store not yet upgraded, opened
// read-only, is read by its own format's Rules.
package docfmt

import (
	"encoding/binary"
	"slices"
)

// HeaderFormat is the store format that brought the escape and the expiry
// header: stores of this format and later hold the values described
// above.
const HeaderFormat = 3

// DeleteMarker is the whole stored value of a delete marker, and the first
// byte of an escape or an expiry header.
const DeleteMarker byte = 0xC1

const (
	escapeTag  byte = 0x00
	expiresTag byte = 0x01
)

// HeaderSize is the size of an expiry header.
const HeaderSize = 10

// IsDeleteMarker reports whether v, a stored version value, is a delete
// marker.
func IsDeleteMarker(v []byte) bool { return len(v) == 1 && v[0] == DeleteMarker }

// AppendHeader appends the expiry header of a version that expires at
// expires (Unix nanoseconds; below 1 counts as 1).
func AppendHeader(dst []byte, expires int64) []byte {
	dst = append(dst, DeleteMarker, expiresTag)
	return binary.BigEndian.AppendUint64(dst, uint64(max(expires, 1)))
}

// Escape makes buf[start:], a document just encoded at the end of buf,
// safe to store without a header: an encoding that starts with C1 gets the
// escape C1 00 before it. Others are left as they are.
func Escape(buf []byte, start int) []byte {
	if start < len(buf) && buf[start] == DeleteMarker {
		return slices.Insert(buf, start, DeleteMarker, escapeTag)
	}
	return buf
}

// Split returns the encoded document of a stored version value that is
// not a delete marker, and its expiry in Unix nanoseconds (0: none).
func Split(v []byte) (doc []byte, expires int64) {
	if len(v) < 2 || v[0] != DeleteMarker {
		return v, 0
	}
	switch v[1] {
	case escapeTag:
		return v[2:], 0
	case expiresTag:
		if len(v) >= HeaderSize {
			if exp := int64(binary.BigEndian.Uint64(v[2:HeaderSize])); exp > 0 {
				return v[HeaderSize:], exp
			}
		}
	}
	return v, 0 // a value of format 2 that starts with C1
}

// HasExpiry reports whether v, a stored version value, starts with an
// expiry header: a check of two bytes, for reads to skip the clock.
func HasExpiry(v []byte) bool {
	return len(v) >= HeaderSize && v[0] == DeleteMarker && v[1] == expiresTag
}

// Expired reports whether v, a stored version value, has an expiry at or
// before now (Unix nanoseconds).
func Expired(v []byte, now int64) bool {
	if !HasExpiry(v) {
		return false
	}
	_, exp := Split(v)
	return exp != 0 && exp <= now
}

// Rules are how a reader takes stored version values: by the current
// format (the zero Rules), or by an older one, for a store opened
// read-only before it was upgraded. Safe for concurrent use (a value).
type Rules struct {
	old uint8 // 0: the current format; 1 or 2: that older format
}

// RulesOf returns the rules of store format n: the current ones from
// format 3 on (and for n below 1, which no store has).
func RulesOf(n int) Rules {
	if n == 1 || n == 2 {
		return Rules{old: uint8(n)}
	}
	return Rules{}
}

// Current reports whether r are the rules of the current format.
func (r Rules) Current() bool { return r.old == 0 }

// IsDeleteMarker reports whether v, a stored version value, is a delete
// marker: never in format 1.
func (r Rules) IsDeleteMarker(v []byte) bool { return r.old != 1 && IsDeleteMarker(v) }

// Split is Split under r: before format 3 the document is the whole value
// and nothing expires.
func (r Rules) Split(v []byte) (doc []byte, expires int64) {
	if r.old != 0 {
		return v, 0
	}
	return Split(v)
}

// HasExpiry is HasExpiry under r: never before format 3.
func (r Rules) HasExpiry(v []byte) bool { return r.old == 0 && HasExpiry(v) }

// Expired is Expired under r: never before format 3.
func (r Rules) Expired(v []byte, now int64) bool { return r.old == 0 && Expired(v, now) }

// Upgrade returns what v, a version value stored by store format from (1
// or 2), must become for the current format to read it as from did, and
// whether it changes. A value that starts with C1 is escaped (C1 00 | v),
// unless it is a delete marker of format 2: it is then what the current
// format writes for the same document, so no C1 value of an older format
// is ever taken for a marker, an escape or a header. Every other value
// stays as it is. Escaping is not idempotent (an escaped value escaped
// again reads as the escape followed by the value): each value must be
// upgraded exactly once.
func Upgrade(from int, v []byte) (upgraded []byte, changed bool) {
	if from >= HeaderFormat || len(v) == 0 || v[0] != DeleteMarker {
		return v, false
	}
	if from >= 2 && IsDeleteMarker(v) {
		return v, false
	}
	out := make([]byte, 0, len(v)+2)
	return append(append(out, DeleteMarker, escapeTag), v...), true
}

// Canonical reports whether v, a stored version value of the current
// format, has one of the forms the current format writes: a value that
// starts with C1 is a delete marker, an escape or an expiry header with
// an expiry of at least 1. Any other C1 value comes from an older format
// and was not escaped when its store was upgraded (tipkv before the fix
// of issue 24 did not escape them): it still reads as it is stored.
func Canonical(v []byte) bool {
	if len(v) == 0 || v[0] != DeleteMarker || len(v) == 1 {
		return true
	}
	switch v[1] {
	case escapeTag:
		return true
	case expiresTag:
		_, exp := Split(v)
		return exp > 0
	}
	return false
}
