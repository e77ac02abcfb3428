package cli

import "github.com/tipkv/tipkv/internal/queuefmt"

// The queue package's value formats (internal/queuefmt, shared with the
// queue package), in the shapes dump, stats and check use.
const (
	queueItemTag    = queuefmt.ItemFormat
	queueDeadTag    = queuefmt.DeadFormat
	queueDeadRawTag = queuefmt.DeadRawFormat
	queueStateTag   = queuefmt.StateFormat
)

// queueHeader is the header of an item or a dead letter. at is when an
// item becomes visible (0: at once), or when a dead letter was moved.
type queueHeader struct {
	attempts uint64
	enqueued int64
	at       int64
	group    string // the message group, "" for none
}

func parseQueueValue(v []byte, tag byte) (queueHeader, []byte, error) {
	h, rest, err := queuefmt.ParseHeader(v, tag)
	return queueHeader{attempts: uint64(h.Attempts), enqueued: h.Enqueued, at: h.At, group: string(h.Group)}, rest, err
}

// queueState is what a queue-state key holds: every sequence number below
// head is consumed and deleted; tail is at most the next one to assign.
type queueState struct {
	head, tail int64
}

func parseQueueState(v []byte) (queueState, error) {
	s, err := queuefmt.ParseState(v)
	return queueState{head: s.Head, tail: s.Tail}, err
}

// queueControl is what a queue-control key holds: whether the queue is
// paused, its cap on messages leased at once (0: none) and, on a shared
// engine under a cap, how many leases it counts (-1: none counted).
type queueControl struct {
	paused      bool
	maxInFlight int
	leases      int
}

func parseQueueControl(v []byte) (queueControl, error) {
	c, err := queuefmt.ParseControl(v)
	qc := queueControl{paused: c.Paused, maxInFlight: c.MaxInFlight, leases: -1}
	if c.Counted {
		qc.leases = len(c.Leases)
	}
	return qc, err
}
