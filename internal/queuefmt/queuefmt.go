// Package queuefmt is the byte format of queue values: items, dead letters
// and the queue-state key. The queue package writes and reads it; the
// command line tool reads it to show and check queues without their Go
// types. Every parser returns an error matching codec.ErrCorrupt, never a
// panic.
//
//	item         02 | name | asc(seq)   0x01 | uvarint attempts | varint enqueued | varint at | payload
//	leased item  02 | name | asc(seq)   0x04 | the same fields | payload
//	dead letter  05 | name | asc(seq)   0x02 | the same fields | payload
//	                                    or 0x03 | the stored bytes of an item whose header was corrupt
//	state        03 | name              0x01 | uvarint head | uvarint tail
//
// Times are Unix nanoseconds, 0 for none. For an item, at is when it becomes
// visible (0: at once); for a leased item, when its lease ends; for a dead
// letter, when it was moved there.
//
// Leased items are written only on shared engines (Caps.Shared), where a
// lease must live in the store for the other processes to see it; on an
// exclusive engine leases live in memory and every item has tag 0x01. A
// reader that predates tag 0x04 takes such an item for corrupt.
package queuefmt

import (
	"encoding/binary"
	"fmt"

	"github.com/tipkv/tipkv/codec"
)

// The first byte of every value is a tag, so a later format can be told
// apart; a value with an unknown tag is corrupt to this version.
const (
	ItemFormat    = 0x01 // a message in the queue
	DeadFormat    = 0x02 // a message in the dead-letter queue
	DeadRawFormat = 0x03 // tag | the bytes of a queue item whose header was corrupt
	LeasedFormat  = 0x04 // a message in the queue, leased until at (shared engines)
	StateFormat   = 0x01 // the queue-state key
)

// MaxSeq bounds sequence numbers, far beyond any queue's life: a queue that
// takes a billion messages a second runs 146 years.
const MaxSeq = 1 << 62

// maxAttempts bounds a stored attempt count.
const maxAttempts = 1 << 31

// Header precedes the payload of items and dead letters.
type Header struct {
	Attempts int   // deliveries so far
	Enqueued int64 // Unix ns
	At       int64 // Unix ns: visible-at for items, moved-at for dead letters
}

// AppendHeader appends tag and h to dst.
func AppendHeader(dst []byte, tag byte, h Header) []byte {
	dst = append(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(h.Attempts))
	dst = binary.AppendVarint(dst, h.Enqueued)
	return binary.AppendVarint(dst, h.At)
}

// ParseHeader splits a stored value that must start with tag into its
// header and payload. The payload aliases v.
func ParseHeader(v []byte, tag byte) (Header, []byte, error) {
	var h Header
	if len(v) == 0 || v[0] != tag {
		return h, nil, fmt.Errorf("%w: value does not start with tag 0x%02x", codec.ErrCorrupt, tag)
	}
	rest := v[1:]
	a, n := binary.Uvarint(rest)
	if n <= 0 || a > maxAttempts {
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
	h.Attempts, h.Enqueued, h.At = int(a), e, at
	return h, rest[n:], nil
}

// ParseItem splits a stored queue item, leased (LeasedFormat) or not
// (ItemFormat), into its header and payload, and says which it is. The
// payload aliases v.
func ParseItem(v []byte) (h Header, leased bool, payload []byte, err error) {
	if len(v) > 0 && v[0] == LeasedFormat {
		h, payload, err = ParseHeader(v, LeasedFormat)
		return h, true, payload, err
	}
	h, payload, err = ParseHeader(v, ItemFormat)
	return h, false, payload, err
}

// State is what the queue-state key holds: every sequence number below Head
// is consumed and deleted; Tail is at most the next one to assign. Both are
// lower bounds (see the queue package doc).
type State struct {
	Head, Tail int64
}

// AppendState appends the encoding of s to dst.
func AppendState(dst []byte, s State) []byte {
	dst = append(dst, StateFormat)
	dst = binary.AppendUvarint(dst, uint64(s.Head))
	return binary.AppendUvarint(dst, uint64(s.Tail))
}

// ParseState decodes a queue-state value.
func ParseState(v []byte) (State, error) {
	if len(v) == 0 || v[0] != StateFormat {
		return State{}, fmt.Errorf("%w: queue state does not start with tag 0x%02x", codec.ErrCorrupt, StateFormat)
	}
	rest := v[1:]
	h, n := binary.Uvarint(rest)
	if n <= 0 || h > MaxSeq {
		return State{}, fmt.Errorf("%w: queue state: bad head", codec.ErrCorrupt)
	}
	rest = rest[n:]
	t, n := binary.Uvarint(rest)
	if n <= 0 || t > MaxSeq || n != len(rest) {
		return State{}, fmt.Errorf("%w: queue state: bad tail", codec.ErrCorrupt)
	}
	return State{Head: int64(h), Tail: int64(t)}, nil
}
