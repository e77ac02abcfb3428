// Package docfmt holds the details of the document value format that tools
// must know besides the codec: the delete marker and the expiry header.
// Package versioned writes them and cmd/tipkv and internal/check read
// them; nothing else may depend on them.
//
// A version's stored value is one of:
//
//   - the single byte C1: a delete marker, written by Collection.Delete as
//     the next version of the document;
//   - C1 01 | expiry (8 bytes, big-endian Unix nanoseconds) | the
//     document encoded by the codec: a version with a time to live
//     (Options.TTL), which reads as gone from its expiry on;
//   - anything else: the document encoded by the collection's codec.
//
// 0xC1 is the one byte msgpack never produces ("never used"), and no JSON
// or UTF-8 text starts with it, so no value of the usual codecs is taken
// for a marker or a header; Put refuses a value whose encoding starts with
// that byte (possible with raw or string codecs). Stores written before
// the header existed refused only the single byte C1, so a value of
// theirs could start with C1 01 and 8 more bytes and be read as expiring:
// only codec.Raw and codec.String values can, and only if their bytes were
// chosen so.
package docfmt

import "encoding/binary"

// DeleteMarker is the whole stored value of a delete marker, and the first
// byte of an expiry header.
const DeleteMarker byte = 0xC1

// expiresTag follows DeleteMarker in an expiry header.
const expiresTag byte = 0x01

// HeaderSize is the size of an expiry header.
const HeaderSize = 10

// IsDeleteMarker reports whether v, a stored version value, is a delete
// marker.
func IsDeleteMarker(v []byte) bool { return len(v) == 1 && v[0] == DeleteMarker }

// Reserved reports whether an encoded document starts with the byte the
// format keeps for itself, so that Put must refuse it.
func Reserved(doc []byte) bool { return len(doc) > 0 && doc[0] == DeleteMarker }

// AppendHeader appends the expiry header of a version that expires at
// expires (Unix nanoseconds, at least 1).
func AppendHeader(dst []byte, expires int64) []byte {
	dst = append(dst, DeleteMarker, expiresTag)
	return binary.BigEndian.AppendUint64(dst, uint64(max(expires, 1)))
}

// Split returns the encoded document of a stored version value that is
// not a delete marker, and its expiry in Unix nanoseconds (0: none).
func Split(v []byte) (doc []byte, expires int64) {
	if len(v) >= HeaderSize && v[0] == DeleteMarker && v[1] == expiresTag {
		if exp := int64(binary.BigEndian.Uint64(v[2:HeaderSize])); exp > 0 {
			return v[HeaderSize:], exp
		}
	}
	return v, 0 // AppendHeader writes no expiry below 1
}

// Expired reports whether v, a stored version value, has an expiry at or
// before now (Unix nanoseconds).
func Expired(v []byte, now int64) bool {
	_, exp := Split(v)
	return exp != 0 && exp <= now
}
