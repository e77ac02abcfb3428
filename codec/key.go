package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// ErrCorrupt is returned by every decoder when its input is not a valid
// encoding. The root package re-exports it as tipkv.ErrCorrupt.
var ErrCorrupt = errors.New("tipkv: corrupt data")

// ErrInvalid is returned when a value cannot be encoded (a channel or a
// function in it, say): bad input, nothing is written. tipkv.ErrInvalid is
// the same error.
var ErrInvalid = errors.New("tipkv: invalid argument")

// NumberSize is the encoded size of asc(n) and desc(n).
const NumberSize = 8

const (
	escByte   = 0x00
	escEscape = 0xFF // 0x00 0xFF is an escaped 0x00
	escTerm   = 0x01 // 0x00 0x01 ends a segment
)

// AppendFamily appends the family byte f to dst.
func AppendFamily(dst []byte, f Family) []byte { return append(dst, byte(f)) }

// AppendBytes appends the escaped, terminated segment for b to dst.
func AppendBytes(dst, b []byte) []byte {
	for {
		i := bytes.IndexByte(b, escByte)
		if i < 0 {
			break
		}
		dst = append(dst, b[:i+1]...)
		dst = append(dst, escEscape)
		b = b[i+1:]
	}
	dst = append(dst, b...)
	return append(dst, escByte, escTerm)
}

// AppendString appends the escaped, terminated segment for s to dst. It
// encodes exactly as AppendBytes([]byte(s)).
func AppendString(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, escByte)
		if i < 0 {
			break
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, escEscape)
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, escByte, escTerm)
}

// AppendAsc appends asc(n): n in 8 bytes, ascending order.
func AppendAsc(dst []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(n)^(1<<63))
}

// AppendDesc appends desc(n): n in 8 bytes, descending order. For n >= 0 the
// bytes are MaxInt64 - n, big-endian.
func AppendDesc(dst []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(n)^math.MaxInt64)
}

// DecodeBytes decodes one segment from the front of b. It returns the
// unescaped bytes (a new slice, never aliasing b) and the rest of b.
func DecodeBytes(b []byte) (v, rest []byte, err error) {
	n, end, err := segmentEnd(b)
	if err != nil {
		return nil, nil, err
	}
	v = make([]byte, 0, n)
	for i := 0; i < end-2; i++ {
		v = append(v, b[i])
		if b[i] == escByte {
			i++ // skip the 0xFF of an escaped zero
		}
	}
	return v, b[end:], nil
}

// DecodeString decodes one segment from the front of b as a string.
func DecodeString(b []byte) (s string, rest []byte, err error) {
	v, rest, err := DecodeBytes(b)
	return string(v), rest, err
}

// SkipSegment returns the rest of b after its first segment, without
// allocating.
func SkipSegment(b []byte) (rest []byte, err error) {
	_, end, err := segmentEnd(b)
	if err != nil {
		return nil, err
	}
	return b[end:], nil
}

// segmentEnd finds the end of the segment at the front of b: n is its decoded
// length and end the offset just past its terminator.
func segmentEnd(b []byte) (n, end int, err error) {
	off := 0
	for {
		i := bytes.IndexByte(b[off:], escByte)
		if i < 0 {
			return 0, 0, corruptf(len(b), "segment has no terminator")
		}
		n += i
		off += i
		if off+1 >= len(b) {
			return 0, 0, corruptf(off, "segment ends inside an escape")
		}
		switch b[off+1] {
		case escTerm:
			return n, off + 2, nil
		case escEscape:
			n++
			off += 2
		default:
			return 0, 0, corruptf(off+1, "bad escape byte 0x%02x", b[off+1])
		}
	}
}

// DecodeAsc decodes asc(n) from the front of b.
func DecodeAsc(b []byte) (n int64, rest []byte, err error) {
	if len(b) < NumberSize {
		return 0, nil, corruptf(len(b), "number needs %d bytes, have %d", NumberSize, len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)), b[NumberSize:], nil
}

// DecodeDesc decodes desc(n) from the front of b.
func DecodeDesc(b []byte) (n int64, rest []byte, err error) {
	if len(b) < NumberSize {
		return 0, nil, corruptf(len(b), "number needs %d bytes, have %d", NumberSize, len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ math.MaxInt64), b[NumberSize:], nil
}

// DecodeFamily decodes the family byte from the front of b.
func DecodeFamily(b []byte) (f Family, rest []byte, err error) {
	if len(b) == 0 {
		return 0, nil, corruptf(0, "empty key")
	}
	return Family(b[0]), b[1:], nil
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix: the exclusive upper bound of the prefix's range. It returns nil
// (no bound) when prefix is empty or all 0xFF bytes. The result is a new
// slice.
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Split returns the length of key's prefix: for families whose keys end in
// a number, the family byte and all its segments (everything before the
// number); for everything else (metadata keys, bare prefixes, bounds, keys
// whose segments do not parse) len(key). It never panics and does not
// allocate.
//
// Split does not insist that exactly 8 bytes follow the segments: a key that
// tipkv did not write, with a suffix of another length, then still shares
// its document's prefix and sorts among its versions, so a read meets it
// and reports it as corrupt instead of skipping past the document. With
// this rule, comparing prefixes first and suffixes second agrees with
// bytes.Compare for every pair of byte strings, not only tipkv's keys,
// because encoded segments are prefix-free.
func Split(key []byte) int {
	n, ok := segmentsEnd(key)
	if !ok {
		return len(key)
	}
	return n
}

// segmentsEnd returns the offset just past the segments of a key of a
// numbered family, and whether there is such a key with all its segments.
func segmentsEnd(key []byte) (int, bool) {
	if len(key) == 0 {
		return 0, false
	}
	nseg := segmentsBefore[key[0]]
	if nseg < 0 {
		return 0, false
	}
	off := 1
	for range nseg {
		_, end, err := segmentEnd(key[off:])
		if err != nil {
			return 0, false
		}
		off += end
	}
	return off, true
}

// ImmediateSuccessor appends to dst the smallest prefix greater than the
// prefix a (Split(a) == len(a)). When a is a complete prefix of a family that
// ends in a number, that is a with one 0x00 byte added to its last segment, a
// key that sorts after every numbered key under a. Otherwise it is a followed
// by 0x00.
func ImmediateSuccessor(dst, a []byte) []byte {
	if isCompletePrefix(a) {
		dst = append(dst, a[:len(a)-1]...)
		return append(dst, escEscape, escByte, escTerm)
	}
	dst = append(dst, a...)
	return append(dst, 0)
}

// isCompletePrefix reports whether a is a family byte of a numbered family
// followed by exactly all its segments: what Split returns for a full key.
func isCompletePrefix(a []byte) bool {
	n, ok := segmentsEnd(a)
	return ok && n == len(a)
}

func corruptf(offset int, format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrCorrupt, offset, fmt.Sprintf(format, args...))
}
