// Package docfmt holds the details of the document value format that tools
// must know besides the codec: the version header (commit time, expiry,
// metadata, delete marker), the escape and the headers of older formats;
// and the feed event header (event.go), which shares its escape.
// Package versioned writes them, the root package's upgrade rewrites the
// values of older formats into them, and cmd/tipkv and internal/check read
// them; nothing else may depend on them.
//
// A version's stored value is, from store format 4 on, written as
//
//	C1 | tag | time (8) | [expiry (8)] | [uvarint n | metadata (n)] | document
//
// where the parts are:
//
//   - C1: the first byte, which no msgpack value, JSON or UTF-8 text starts
//     with;
//   - tag: 0x10 | flags, where bit 0 (0x01) says an expiry follows the
//     time, bit 1 (0x02) that metadata follows, bit 2 (0x04) that the
//     version is a delete marker (then no expiry and no document follow);
//     the tags 0x10-0x16 but 0x15 are the ones written;
//   - time: the version's commit time, Unix nanoseconds, big-endian,
//     at least 1 (see package versioned: one reading of the DB's clock per
//     Update, forced to increase within a document);
//   - expiry: Unix nanoseconds, big-endian, at least 1: a version with a
//     time to live (Options.TTL), which reads as gone from its expiry on;
//   - metadata: its length as a uvarint, then the encoded metadata, at
//     most MaxMetaSize bytes;
//   - document: the document encoded by the codec, whatever its first
//     byte (the header before it says where it starts: no escape).
//
// So a version without expiry or metadata costs 10 bytes more than its
// document. Example: the document {"a":1} (msgpack 81 a1 61 01) committed
// at 2026-11-26T12:00:00Z (Unix ns 0x18eb968af5288000):
//
//	c1 10 18 eb 96 8a f5 28 80 00 81 a1 61 01
//
// and its delete marker at the next nanosecond: c1 14 18 eb 96 8a f5 28 80 01.
//
// Values of older formats stay as they were written and keep reading as
// they did; their commit time is unknown (0):
//
//   - the single byte C1: a delete marker (formats 2 and 3);
//   - C1 01 | expiry (8, at least 1) | document: a version with a time to
//     live (format 3);
//   - C1 00 | document: an encoding that starts with C1 itself (possible
//     with raw or string codecs), escaped (format 3, and the upgrades);
//   - anything else, C1 values that match none of the forms above
//     included: the document encoded by the codec.
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
// values format 3 writes (Canonical). Format 3 wrote nothing that format 4
// reads otherwise, but a store of format 3 may hold C1 values of format 2
// that the upgrade to 3 did not escape (tipkv before the fix of issue 24):
// those that format 4 would take for a version header are escaped by the
// upgrade from 3. A store not yet upgraded, opened read-only, is read by
// its own format's Rules.
package docfmt

import (
	"encoding/binary"
	"slices"
)

// HeaderFormat is the store format that brought the escape and the expiry
// header.
const HeaderFormat = 3

// TimeFormat is the store format that brought the version header with the
// commit time: stores of this format and later hold the values described
// above.
const TimeFormat = 4

// DeleteMarker is the whole stored value of a delete marker of formats 2
// and 3, and the first byte of every header and escape.
const DeleteMarker byte = 0xC1

const (
	escapeTag  byte = 0x00
	expiresTag byte = 0x01

	// The version header's tag: timeTag | flags.
	timeTag     byte = 0x10
	tagMask     byte = 0xF8 // the bits that must equal timeTag
	flagExpires byte = 0x01
	flagMeta    byte = 0x02
	flagDeleted byte = 0x04
)

// HeaderSize is the size of a format-3 expiry header, and of a version
// header without expiry or metadata.
const HeaderSize = 10

// MaxMetaSize is the largest encoded metadata a version header holds.
const MaxMetaSize = 16 << 10

// Version is a stored version value taken apart. Its slices alias the
// value.
type Version struct {
	// Doc is the encoded document; nil for a delete marker.
	Doc []byte
	// Time is the commit time, Unix nanoseconds: 0 for a version of an
	// older format (or read by an older format's rules).
	Time int64
	// Expires is the expiry, Unix nanoseconds: 0 for none.
	Expires int64
	// Meta is the encoded metadata (see AppendMeta); nil for none.
	Meta []byte
	// Deleted: the version is a delete marker.
	Deleted bool
}

// IsDeleteMarker reports whether v, a stored version value, is a delete
// marker of format 2 or 3: the single byte C1. See Rules.IsDeleteMarker
// for every format's markers.
func IsDeleteMarker(v []byte) bool { return len(v) == 1 && v[0] == DeleteMarker }

// AppendHeader appends the format-3 expiry header of a version that
// expires at expires (Unix nanoseconds; below 1 counts as 1). Format 4
// writes AppendVersion's header instead; this one remains for tests and
// tools that build values of format 3.
func AppendHeader(dst []byte, expires int64) []byte {
	dst = append(dst, DeleteMarker, expiresTag)
	return binary.BigEndian.AppendUint64(dst, uint64(max(expires, 1)))
}

// AppendVersion appends the version header of a version committed at
// time (Unix nanoseconds; below 1 counts as 1; SetTime may set it later),
// expiring at expires (0: never; ignored for a delete marker), with the
// encoded metadata meta (nil: none; at most MaxMetaSize bytes, which the
// caller checks). The document follows it, appended by the caller; a
// delete marker has none.
func AppendVersion(dst []byte, time int64, deleted bool, expires int64, meta []byte) []byte {
	tag := timeTag
	if deleted {
		tag |= flagDeleted
		expires = 0
	}
	if expires > 0 {
		tag |= flagExpires
	}
	if meta != nil {
		tag |= flagMeta
	}
	dst = append(dst, DeleteMarker, tag)
	dst = binary.BigEndian.AppendUint64(dst, uint64(max(time, 1)))
	if expires > 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(expires))
	}
	if meta != nil {
		dst = binary.AppendUvarint(dst, uint64(len(meta)))
		dst = append(dst, meta...)
	}
	return dst
}

// SetTime sets the commit time of v, a value that starts with a header
// AppendVersion wrote, to time (below 1 counts as 1).
func SetTime(v []byte, time int64) {
	binary.BigEndian.PutUint64(v[2:HeaderSize], uint64(max(time, 1)))
}

// Escape makes buf[start:], a document just encoded at the end of buf,
// safe to store without a header: an encoding that starts with C1 gets the
// escape C1 00 before it. Others are left as they are. Format 4 writes
// every version with a header, so only tests and tools use it.
func Escape(buf []byte, start int) []byte {
	if start < len(buf) && buf[start] == DeleteMarker {
		return slices.Insert(buf, start, DeleteMarker, escapeTag)
	}
	return buf
}

// parseTimed takes apart v, a value that starts with C1 and a version
// header's tag. ok is false when the header is not one AppendVersion
// writes: v then reads as a document, as any C1 value that matches no
// form.
func parseTimed(v []byte) (ver Version, ok bool) {
	tag := v[1]
	if len(v) < HeaderSize || tag&flagDeleted != 0 && tag&flagExpires != 0 {
		return Version{}, false
	}
	ver.Time = int64(binary.BigEndian.Uint64(v[2:HeaderSize]))
	if ver.Time < 1 {
		return Version{}, false
	}
	rest := v[HeaderSize:]
	if tag&flagExpires != 0 {
		if len(rest) < 8 {
			return Version{}, false
		}
		if ver.Expires = int64(binary.BigEndian.Uint64(rest)); ver.Expires < 1 {
			return Version{}, false
		}
		rest = rest[8:]
	}
	if tag&flagMeta != 0 {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) || n > MaxMetaSize {
			return Version{}, false
		}
		ver.Meta, rest = rest[k:k+int(n):k+int(n)], rest[k+int(n):]
	}
	if tag&flagDeleted != 0 {
		if len(rest) != 0 {
			return Version{}, false
		}
		ver.Deleted = true
		return ver, true
	}
	ver.Doc = rest
	return ver, true
}

// Rules are how a reader takes stored version values: by the current
// format (the zero Rules), or by an older one, for a store opened
// read-only before it was upgraded. Safe for concurrent use (a value).
type Rules struct {
	old uint8 // 0: the current format; 1, 2 or 3: that older format
}

// RulesOf returns the rules of store format n: the current ones from
// format 4 on (and for n below 1, which no store has).
func RulesOf(n int) Rules {
	if n >= 1 && n < TimeFormat {
		return Rules{old: uint8(n)}
	}
	return Rules{}
}

// Current reports whether r are the rules of the current format.
func (r Rules) Current() bool { return r.old == 0 }

// Parse takes apart v, a stored version value, as r reads it.
func (r Rules) Parse(v []byte) Version {
	if len(v) == 0 || v[0] != DeleteMarker || r.old == 1 {
		return Version{Doc: v}
	}
	if len(v) == 1 {
		return Version{Deleted: true} // format 2's marker
	}
	if r.old == 2 {
		return Version{Doc: v}
	}
	switch tag := v[1]; {
	case tag == escapeTag:
		return Version{Doc: v[2:]}
	case tag == expiresTag:
		if len(v) >= HeaderSize {
			if exp := int64(binary.BigEndian.Uint64(v[2:HeaderSize])); exp > 0 {
				return Version{Doc: v[HeaderSize:], Expires: exp}
			}
		}
	case tag&tagMask == timeTag && r.old == 0:
		if ver, ok := parseTimed(v); ok {
			return ver
		}
	}
	return Version{Doc: v} // a C1 value that matches no form
}

// IsDeleteMarker reports whether v, a stored version value, is a delete
// marker: never in format 1.
func (r Rules) IsDeleteMarker(v []byte) bool {
	if len(v) == 0 || v[0] != DeleteMarker || r.old == 1 {
		return false
	}
	if len(v) == 1 {
		return true
	}
	return r.old == 0 && v[1]&(tagMask|flagDeleted) == timeTag|flagDeleted && r.Parse(v).Deleted
}

// Split returns the encoded document of a stored version value that is
// not a delete marker, and its expiry in Unix nanoseconds (0: none).
func (r Rules) Split(v []byte) (doc []byte, expires int64) {
	ver := r.Parse(v)
	return ver.Doc, ver.Expires
}

// HasExpiry reports whether v, a stored version value, has an expiry: a
// check of two bytes, for reads to skip the clock.
func (r Rules) HasExpiry(v []byte) bool {
	if len(v) < HeaderSize || v[0] != DeleteMarker || r.old == 1 || r.old == 2 {
		return false
	}
	return v[1] == expiresTag || (r.old == 0 && v[1]&(tagMask|flagExpires) == timeTag|flagExpires)
}

// Expired reports whether v, a stored version value, has an expiry at or
// before now (Unix nanoseconds).
func (r Rules) Expired(v []byte, now int64) bool {
	if !r.HasExpiry(v) {
		return false
	}
	exp := r.Parse(v).Expires
	return exp != 0 && exp <= now
}

// Split is Rules.Split by the current format.
func Split(v []byte) (doc []byte, expires int64) { return Rules{}.Split(v) }

// HasExpiry is Rules.HasExpiry by the current format.
func HasExpiry(v []byte) bool { return Rules{}.HasExpiry(v) }

// Expired is Rules.Expired by the current format.
func Expired(v []byte, now int64) bool { return Rules{}.Expired(v, now) }

// Upgrade returns what v, a version value stored by store format from (1
// to 3), must become for the current format to read it as from did, and
// whether it changes.
//
// From format 1 or 2, a value that starts with C1 is escaped (C1 00 | v),
// unless it is a delete marker of format 2: it is then what the current
// format reads as the same marker, so no C1 value of an older format is
// ever taken for a marker, an escape or a header. From format 3, only a
// value that format 3 read as a document (a C1 value of format 2 that the
// upgrade to 3 left unescaped) and that the current format would take for
// a version header is escaped. Every other value stays as it is. Escaping
// is not idempotent (an escaped value escaped again reads as the escape
// followed by the value): each value must be upgraded exactly once.
func Upgrade(from int, v []byte) (upgraded []byte, changed bool) {
	if from >= TimeFormat || len(v) == 0 || v[0] != DeleteMarker {
		return v, false
	}
	switch {
	case from >= HeaderFormat:
		if len(v) < 2 || v[1]&tagMask != timeTag {
			return v, false
		}
		if _, ok := parseTimed(v); !ok {
			return v, false // reads as a document by both formats
		}
	case from == 2 && IsDeleteMarker(v):
		return v, false
	}
	out := make([]byte, 0, len(v)+2)
	return append(append(out, DeleteMarker, escapeTag), v...), true
}

// Canonical reports whether v, a stored version value of the current
// format, has one of the forms a format writes: a value that starts with
// C1 is a version header, a delete marker, an escape or an expiry header
// with an expiry of at least 1. Any other C1 value comes from format 2
// and was not escaped when its store was upgraded to format 3 (tipkv
// before the fix of issue 24 did not escape them): it still reads as it
// is stored.
func Canonical(v []byte) bool {
	if len(v) == 0 || v[0] != DeleteMarker || len(v) == 1 {
		return true
	}
	switch tag := v[1]; {
	case tag == escapeTag:
		return true
	case tag == expiresTag:
		_, exp := Split(v)
		return exp > 0
	case tag&tagMask == timeTag:
		_, ok := parseTimed(v)
		return ok
	}
	return false
}
