package queue

import (
	"bytes"
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
)

// MessageState says where a message stands, as Inspect sees it.
type MessageState uint8

const (
	// Ready is a visible message: the next Receive or Pop may deliver it
	// (a message of a group once its group's window reaches it; see
	// "Message groups" in the package doc).
	Ready MessageState = iota + 1
	// Leased is a message delivered to a consumer whose lease has not
	// ended (on a shared engine: by any process, until Caps.ClockSkew
	// after its end). MessageInfo.Until is when the lease ends.
	Leased
	// Delayed is a message invisible until MessageInfo.Until: enqueued
	// with EnqueueAt, or released or retried with a delay.
	Delayed
	// Busy is a message that a write of this process is about to change
	// (a delivery, an Ack, a move to the dead letters) while it commits.
	Busy
)

// String returns the state's name in lower case: "ready", "leased",
// "delayed" or "busy".
func (s MessageState) String() string {
	switch s {
	case Ready:
		return "ready"
	case Leased:
		return "leased"
	case Delayed:
		return "delayed"
	case Busy:
		return "busy"
	}
	return fmt.Sprintf("MessageState(%d)", uint8(s))
}

// MessageInfo is one message as Inspect reads it: the message (its ID is
// the zero ID and Attempts counts the deliveries so far, as for Peek) and
// where it stands.
type MessageInfo[T any] struct {
	Message[T]
	State MessageState
	// Until is when a Leased message's lease ends, or when a Delayed
	// message becomes visible; the zero time otherwise.
	Until time.Time
}

// Inspect returns up to max of the queue's messages with sequence numbers
// above after, oldest first, whatever their state (ready, leased, delayed),
// without leasing or changing them: it is for people and tools that look
// at a queue, such as a console, not for consumers. Pass the Seq of the
// last message of a page as after for the next; after 0 starts at the
// head. Dead letters are not messages of the queue (see DeadLetters).
//
// It reads one bounded scan of the queue's items from the head (or after,
// if greater): on Pebble up to the messages whose commit has returned,
// with each lease and delay from memory; on a shared engine every message
// stored, leases read from the messages. A stored value that does not
// decode is an error that matches tipkv.ErrCorrupt and names the key.
// max < 1 is tipkv.ErrInvalid.
func (q *Queue[T]) Inspect(after int64, max int) ([]MessageInfo[T], error) {
	c := q.c
	if max < 1 {
		return nil, fmt.Errorf("%w: queue %q: inspect %d messages: want max >= 1", tipkv.ErrInvalid, c.name, max)
	}
	now, err := c.now()
	if err != nil {
		return nil, fmt.Errorf("queue %q: inspect: %w", c.name, err)
	}
	var ins []inspected
	if c.sm != nil {
		ins, err = c.inspectShared(after, max, now)
	} else {
		ins, err = c.inspect(after, max, now)
	}
	if err != nil {
		return nil, fmt.Errorf("queue %q: inspect: %w", c.name, err)
	}
	out := make([]MessageInfo[T], len(ins))
	for i, in := range ins {
		if in.bad != nil {
			return nil, fmt.Errorf("queue %q: inspect: %w", c.name, c.corrupt(in.seq, in.bad))
		}
		if err := q.codec.Decode(in.payload, &out[i].Value); err != nil {
			return nil, fmt.Errorf("queue %q: inspect: %w", c.name, c.corrupt(in.seq, err))
		}
		out[i].Seq = in.seq
		out[i].Attempts = in.hdr.attempts
		out[i].Enqueued = fromUnixNano(in.hdr.enqueued)
		out[i].Headers, out[i].meta, out[i].Group = decodeHeaders(in.hdr.headers), bytes.Clone(in.hdr.meta), string(in.hdr.group)
		out[i].State, out[i].Until = in.state, in.until
	}
	return out, nil
}

// inspected is a stored message read by inspect, with its state.
type inspected struct {
	seq     int64
	hdr     header
	payload []byte // aliases a copy of the stored value
	bad     error  // the header does not parse
	state   MessageState
	until   time.Time
}

// parseInspected fills in from a copy of a stored item.
func parseInspected(seq int64, v []byte) inspected {
	in := inspected{seq: seq}
	h, payload, err := parseHeader(v, itemFormat)
	if err != nil {
		in.bad = err
		return in
	}
	in.hdr, in.payload = h, payload
	return in
}

// inspect reads the messages of [max(after+1, head), watermark) on
// Pebble, at most limit of them, each with its state: a message the
// queue has delivered since it loaded has an entry that says it, the
// others are ready unless their header delays them.
func (c *core) inspect(after int64, limit int, now time.Time) ([]inspected, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, tipkv.ErrClosed
	}
	c.expire(now)
	from := max(after+1, c.head())
	if from >= c.watermark {
		return nil, nil
	}
	it, err := engine.NewIterN(c.store, c.k.item(nil, from), c.k.item(nil, c.watermark), limit)
	if err != nil {
		return nil, err
	}
	nowNS := now.UnixNano()
	var out []inspected
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		seq, err := seqOf(c.k.itemPrefix, it.Key())
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		var e *entry
		if seq < c.cursor {
			if e = c.entryAt(seq); e == nil {
				continue // consumed: its delete is committing
			}
		}
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		in := parseInspected(seq, bytes.Clone(v))
		switch {
		case e == nil && in.bad == nil && in.hdr.at > nowNS:
			in.state, in.until = Delayed, time.Unix(0, in.hdr.at)
		case e == nil || e.state == stReady:
			in.state = Ready
		case e.state == stLeased:
			in.state, in.until = Leased, e.deadline
		case e.state == stWaiting:
			in.state, in.until = Delayed, e.deadline
		case e.state == stBlocked && e.deadline.After(now):
			in.state, in.until = Delayed, e.deadline
		case e.state == stBlocked:
			in.state = Ready
		default:
			in.state = Busy
		}
		out = append(out, in)
	}
	return out, closeIter(it)
}

// inspectShared reads the stored messages of a shared queue from
// max(after+1, this process's head), at most limit of them. A leased
// item says when its lease ends; it counts as leased until ClockSkew
// after that, as deliveries see it.
func (c *core) inspectShared(after int64, limit int, now time.Time) ([]inspected, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	from, err := c.scanFrom()
	if err != nil {
		return nil, err
	}
	from = max(from, after+1)
	it, err := engine.NewIterN(c.store, c.k.item(nil, from), c.k.itemEnd, limit)
	if err != nil {
		return nil, err
	}
	nowNS := now.UnixNano()
	var out []inspected
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		seq, err := seqOf(c.k.itemPrefix, it.Key())
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		v = bytes.Clone(v)
		in := inspected{seq: seq, state: Ready}
		h, leased, payload, err := parseItem(v)
		switch {
		case err != nil:
			in.bad = err
		case leased && c.sm.visibleAt(h, true) > nowNS:
			in.state, in.until = Leased, time.Unix(0, h.at)
		case !leased && h.at > nowNS:
			in.state, in.until = Delayed, time.Unix(0, h.at)
		}
		in.hdr, in.payload = h, payload
		out = append(out, in)
	}
	if err := closeIter(it); err != nil {
		return nil, err
	}
	return out, nil
}
