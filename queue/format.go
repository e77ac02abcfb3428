package queue

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tipkv/tipkv/codec"
)

// Keys of one queue (see the package doc):
//
//	item         02 | name | asc(seq)   header + payload
//	state        03 | name              stateFormat | uvarint head | uvarint tail
//	dead letter  05 | name | asc(seq)   header + payload
type keys struct {
	itemPrefix []byte // 02 | name
	itemEnd    []byte // the exclusive end of the queue's items
	state      []byte // 03 | name
	deadPrefix []byte // 05 | name
	deadEnd    []byte
}

func newKeys(name string) keys {
	ip := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), name)
	dp := codec.AppendString(codec.AppendFamily(nil, codec.FamilyDeadLetters), name)
	return keys{
		itemPrefix: ip,
		itemEnd:    codec.PrefixEnd(ip),
		state:      codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), name),
		deadPrefix: dp,
		deadEnd:    codec.PrefixEnd(dp),
	}
}

// item returns the key of the message at seq, appended to dst.
func (k *keys) item(dst []byte, seq int64) []byte {
	return codec.AppendAsc(append(dst, k.itemPrefix...), seq)
}

// dead returns the key of the dead letter at seq, appended to dst.
func (k *keys) dead(dst []byte, seq int64) []byte {
	return codec.AppendAsc(append(dst, k.deadPrefix...), seq)
}

// seqOf decodes the sequence number of an item or dead-letter key under
// prefix.
func seqOf(prefix, key []byte) (int64, error) {
	if len(key) != len(prefix)+codec.NumberSize {
		return 0, fmt.Errorf("%w: key %x is not a queue key under %x", codec.ErrCorrupt, key, prefix)
	}
	seq, _, err := codec.DecodeAsc(key[len(prefix):])
	if err != nil {
		return 0, fmt.Errorf("%w: key %x", err, key)
	}
	return seq, nil
}

// Value formats. The first byte is a tag, so a later format can be told
// apart; a value with an unknown tag is corrupt to this version.
const (
	itemFormat    = 0x01 // a message in the queue
	deadFormat    = 0x02 // a message in the dead-letter queue
	deadRawFormat = 0x03 // tag | the bytes of a queue item whose header was corrupt
	stateFormat   = 0x01 // the queue-state key
)

// header precedes the payload of items and dead letters:
//
//	tag | uvarint attempts | varint enqueued (Unix ns) | varint at (Unix ns) | payload
//
// attempts counts deliveries. at is, for an item, when it becomes visible
// (0: at once) and, for a dead letter, when it was moved there.
type header struct {
	attempts int
	enqueued int64
	at       int64
}

func appendHeader(dst []byte, tag byte, h header) []byte {
	dst = append(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(h.attempts))
	dst = binary.AppendVarint(dst, h.enqueued)
	return binary.AppendVarint(dst, h.at)
}

// parseHeader splits a stored value into its header and payload. The
// payload aliases v.
func parseHeader(v []byte, tag byte) (header, []byte, error) {
	var h header
	if len(v) == 0 || v[0] != tag {
		return h, nil, fmt.Errorf("%w: value does not start with tag 0x%02x", codec.ErrCorrupt, tag)
	}
	rest := v[1:]
	a, n := binary.Uvarint(rest)
	if n <= 0 || a > 1<<31 {
		return h, nil, fmt.Errorf("%w: bad attempts count", codec.ErrCorrupt)
	}
	rest = rest[n:]
	e, n := binary.Varint(rest)
	if n <= 0 {
		return h, nil, fmt.Errorf("%w: bad enqueue time", codec.ErrCorrupt)
	}
	rest = rest[n:]
	at, n := binary.Varint(rest)
	if n <= 0 {
		return h, nil, fmt.Errorf("%w: bad time", codec.ErrCorrupt)
	}
	h.attempts, h.enqueued, h.at = int(a), e, at
	return h, rest[n:], nil
}

// state is what the queue-state key holds. Every sequence number below head
// is consumed (acknowledged, popped or dead-lettered) and deleted; tail is
// at most the next sequence number to assign. Both are lower bounds written
// by the batch that deletes items; see the package doc for why that is
// crash-consistent.
type state struct {
	head, tail int64
}

func appendState(dst []byte, s state) []byte {
	dst = append(dst, stateFormat)
	dst = binary.AppendUvarint(dst, uint64(s.head))
	return binary.AppendUvarint(dst, uint64(s.tail))
}

func parseState(v []byte) (state, error) {
	if len(v) == 0 || v[0] != stateFormat {
		return state{}, fmt.Errorf("%w: queue state does not start with tag 0x%02x", codec.ErrCorrupt, stateFormat)
	}
	rest := v[1:]
	h, n := binary.Uvarint(rest)
	if n <= 0 || h > maxSeq {
		return state{}, fmt.Errorf("%w: queue state: bad head", codec.ErrCorrupt)
	}
	rest = rest[n:]
	t, n := binary.Uvarint(rest)
	if n <= 0 || t > maxSeq || n != len(rest) {
		return state{}, fmt.Errorf("%w: queue state: bad tail", codec.ErrCorrupt)
	}
	return state{head: int64(h), tail: int64(t)}, nil
}

// maxSeq bounds sequence numbers, far beyond any queue's life: a queue
// that takes a billion messages a second runs 290 years.
const maxSeq = 1 << 62

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
