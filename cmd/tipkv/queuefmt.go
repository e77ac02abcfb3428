package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The queue package's value formats, read here so that dump and check can
// show and verify queue keys without knowing their Go types. They mirror
// queue/format.go (unexported there); TestQueueFormatMirror writes through
// the queue package and reads back through these, so a drift fails a test.
//
//	item         02 | name | asc(seq)   0x01 | uvarint attempts | varint enqueued | varint at | payload
//	dead letter  05 | name | asc(seq)   0x02 | the same
//	                                    or 0x03 | the stored bytes of an item whose header was corrupt
//	state        03 | name              0x01 | uvarint head | uvarint tail
const (
	queueItemTag    = 0x01
	queueDeadTag    = 0x02
	queueDeadRawTag = 0x03
	queueStateTag   = 0x01
	queueMaxSeq     = 1 << 62
)

// queueHeader is the header of an item or a dead letter. at is when an
// item becomes visible (0: at once), or when a dead letter was moved.
type queueHeader struct {
	attempts uint64
	enqueued int64
	at       int64
}

func parseQueueValue(v []byte, tag byte) (queueHeader, []byte, error) {
	var h queueHeader
	if len(v) == 0 || v[0] != tag {
		return h, nil, fmt.Errorf("does not start with tag 0x%02x", tag)
	}
	rest := v[1:]
	a, n := binary.Uvarint(rest)
	if n <= 0 || a > 1<<31 {
		return h, nil, errors.New("bad attempts count")
	}
	rest = rest[n:]
	e, n := binary.Varint(rest)
	if n <= 0 {
		return h, nil, errors.New("bad enqueue time")
	}
	rest = rest[n:]
	at, n := binary.Varint(rest)
	if n <= 0 {
		return h, nil, errors.New("bad time")
	}
	h.attempts, h.enqueued, h.at = a, e, at
	return h, rest[n:], nil
}

// queueState is what a queue-state key holds: every sequence number below
// head is consumed and deleted; tail is at most the next one to assign.
type queueState struct {
	head, tail int64
}

func parseQueueState(v []byte) (queueState, error) {
	if len(v) == 0 || v[0] != queueStateTag {
		return queueState{}, fmt.Errorf("does not start with tag 0x%02x", queueStateTag)
	}
	rest := v[1:]
	h, n := binary.Uvarint(rest)
	if n <= 0 || h > queueMaxSeq {
		return queueState{}, errors.New("bad head")
	}
	rest = rest[n:]
	t, n := binary.Uvarint(rest)
	if n <= 0 || t > queueMaxSeq || n != len(rest) {
		return queueState{}, errors.New("bad tail")
	}
	return queueState{head: int64(h), tail: int64(t)}, nil
}
