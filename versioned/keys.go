package versioned

import (
	"bytes"
	"fmt"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
)

// Limits on what a collection or feed stores. Writes over a limit fail with
// ErrInvalid and write nothing.
const (
	// MaxNameSize is the largest collection or stream name, in bytes.
	MaxNameSize = 256
	// MaxIDSize is the largest document id, in bytes.
	MaxIDSize = 1024
	// MaxValueSize is the largest encoded value (document or event), in
	// bytes.
	MaxValueSize = 4 << 20
)

func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty %s name", tipkv.ErrInvalid, what)
	case len(name) > MaxNameSize:
		return fmt.Errorf("%w: %s name of %d bytes is over the limit of %d", tipkv.ErrInvalid, what, len(name), MaxNameSize)
	}
	return nil
}

func checkID(coll, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: %s: empty document id", tipkv.ErrInvalid, coll)
	case len(id) > MaxIDSize:
		return fmt.Errorf("%w: %s: document id of %d bytes is over the limit of %d", tipkv.ErrInvalid, coll, len(id), MaxIDSize)
	}
	return nil
}

func checkValue(v []byte) error {
	if len(v) > MaxValueSize {
		return fmt.Errorf("%w: encoded value of %d bytes is over the limit of %d", tipkv.ErrInvalid, len(v), MaxValueSize)
	}
	return nil
}

// namePrefix returns family | name: the prefix of a collection's or a
// stream's keys.
func namePrefix(f codec.Family, name string) []byte {
	return codec.AppendString(codec.AppendFamily(nil, f), name)
}

// appendEscaped appends the escaped bytes of s without the segment
// terminator: the common prefix of the segments of every string that begins
// with s.
func appendEscaped(dst []byte, s string) []byte {
	dst = codec.AppendString(dst, s)
	return dst[:len(dst)-2]
}

// numberOf decodes the trailing number of key, whose prefix (everything
// before the number) is prefixLen bytes long.
func numberOf(key []byte, prefixLen int) (int64, error) {
	if len(key) != prefixLen+codec.NumberSize {
		return 0, fmt.Errorf("%w: key %x: want %d bytes, have %d", tipkv.ErrCorrupt, key, prefixLen+codec.NumberSize, len(key))
	}
	n, _, err := codec.DecodeDesc(key[prefixLen:])
	if err != nil {
		return 0, fmt.Errorf("key %x: %w", key, err)
	}
	return n, nil
}

// decodeDocTail decodes the part of a version key after its collection
// prefix: the id segment and desc(version).
func decodeDocTail(tail []byte) (id string, v int64, err error) {
	rest, err := codec.SkipSegment(tail)
	if err != nil {
		return "", 0, err
	}
	if seg := tail[:len(tail)-len(rest)-2]; bytes.IndexByte(seg, 0) < 0 {
		id = string(seg) // no escapes: one allocation, not two
	} else if id, _, err = codec.DecodeString(tail); err != nil {
		return "", 0, err
	}
	if id == "" {
		return "", 0, fmt.Errorf("%w: empty document id", tipkv.ErrCorrupt)
	}
	if len(rest) != codec.NumberSize {
		return "", 0, fmt.Errorf("%w: version needs %d bytes, have %d", tipkv.ErrCorrupt, codec.NumberSize, len(rest))
	}
	v, _, err = codec.DecodeDesc(rest)
	if err != nil {
		return "", 0, err
	}
	if v < 1 {
		return "", 0, fmt.Errorf("%w: version %d", tipkv.ErrCorrupt, v)
	}
	return id, v, nil
}

// key is a decoded key of this package's families.
type key struct {
	family codec.Family
	name   string // collection or stream
	id     string // document id; empty for feed keys
	n      int64  // version or position
}

// decodeKey decodes a whole version or feed key. It is what a tool reading
// the store would use; the reads decode only the part they do not know.
func decodeKey(b []byte) (key, error) {
	f, rest, err := codec.DecodeFamily(b)
	if err != nil {
		return key{}, err
	}
	k := key{family: f}
	if f != codec.FamilyVersions && f != codec.FamilyFeed {
		return key{}, fmt.Errorf("%w: key %x: family 0x%02x is neither versions nor feed", tipkv.ErrCorrupt, b, byte(f))
	}
	if k.name, rest, err = codec.DecodeString(rest); err != nil {
		return key{}, fmt.Errorf("key %x: %w", b, err)
	}
	if k.name == "" {
		return key{}, fmt.Errorf("%w: key %x: empty name", tipkv.ErrCorrupt, b)
	}
	if f == codec.FamilyVersions {
		k.id, k.n, err = decodeDocTail(rest)
		if err != nil {
			return key{}, fmt.Errorf("key %x: %w", b, err)
		}
		return k, nil
	}
	if len(rest) != codec.NumberSize {
		return key{}, fmt.Errorf("%w: key %x: position needs %d bytes, have %d", tipkv.ErrCorrupt, b, codec.NumberSize, len(rest))
	}
	k.n, _, _ = codec.DecodeDesc(rest)
	return k, nil
}
