package versioned

import (
	"fmt"
	"slices"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// The lease of a consumer group (see members.go):
//
//	key    0A | stream | group | asc(epoch)     epoch >= 1
//	value  asc(deadline) | member               8 bytes, then 1 to MaxNameSize
//
// deadline is Unix nanoseconds, 0 for a lease its member left; member is
// the holder's name, raw bytes to the end of the value.

// leasePrefix returns 0A | stream | group: the prefix of the group's lease
// keys.
func leasePrefix(stream, group string) []byte {
	return codec.AppendString(namePrefix(codec.FamilyFeedLeases, stream), group)
}

// leaseKey returns the key of the lease of epoch under prefix.
func leaseKey(prefix []byte, epoch int64) []byte {
	return codec.AppendAsc(slices.Clip(prefix), epoch)
}

func encodeLease(deadline int64, member string) []byte {
	return append(codec.AppendAsc(make([]byte, 0, codec.NumberSize+len(member)), deadline), member...)
}

// leaseRecord is a stored lease: its key and value, decoded.
type leaseRecord struct {
	key, raw []byte
	epoch    int64
	deadline int64
	member   string
}

// decodeLease decodes the lease stored at key (whose prefix, up to the
// epoch, is prefixLen bytes) with value v. The slices are kept.
func decodeLease(key, v []byte, prefixLen int) (leaseRecord, error) {
	l := leaseRecord{key: key, raw: v}
	if len(key) != prefixLen+codec.NumberSize {
		return l, fmt.Errorf("%w: lease key %x: want %d bytes, have %d", tipkv.ErrCorrupt, key, prefixLen+codec.NumberSize, len(key))
	}
	l.epoch, _, _ = codec.DecodeAsc(key[prefixLen:])
	if l.epoch < 1 {
		return l, fmt.Errorf("%w: lease key %x: epoch %d", tipkv.ErrCorrupt, key, l.epoch)
	}
	if len(v) <= codec.NumberSize || len(v) > codec.NumberSize+MaxNameSize {
		return l, fmt.Errorf("%w: lease %x: value of %d bytes, want %d and a member name of 1 to %d", tipkv.ErrCorrupt, key, len(v), codec.NumberSize, MaxNameSize)
	}
	l.deadline, _, _ = codec.DecodeAsc(v)
	if l.deadline < 0 {
		return l, fmt.Errorf("%w: lease %x: deadline %d", tipkv.ErrCorrupt, key, l.deadline)
	}
	l.member = string(v[codec.NumberSize:])
	return l, nil
}

// readLease returns the group's lease under prefix, the one of the
// greatest epoch (there is one but between a takeover's delete and write,
// which one batch holds), and false when the group has none: one bounded
// scan of the prefix.
func readLease(r engine.Reader, prefix []byte) (l leaseRecord, found bool, err error) {
	it, err := newIter(r, prefix, codec.PrefixEnd(prefix), 2)
	if err != nil {
		return l, false, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return l, false, err
		}
		if l, err = decodeLease(slices.Clone(it.Key()), slices.Clone(v), len(prefix)); err != nil {
			return l, false, err
		}
		found = true
	}
	return l, found, it.Error()
}
