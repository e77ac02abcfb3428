// Package docfmt holds the details of the document value format that tools
// must know besides the codec: the delete marker, the escape and the
// expiry header. Package versioned writes them and cmd/tipkv and
// internal/check read them; nothing else may depend on them.
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
// stored as they are. Format 2 stores held no header and no escape; a raw
// value of theirs that starts with C1 00, or with C1 01 and 8 more bytes,
// would now be read as escaped or expiring (Put refused only the single
// byte C1 then); any other value starting with C1 reads as it was.
package docfmt

import (
	"encoding/binary"
	"slices"
)

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
