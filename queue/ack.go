package queue

import (
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
)

// Ack removes the messages that ids name, through w: a *tipkv.DB commits
// at once, a *tipkv.Batch commits with the rest of its Update (so that
// handling a message and acknowledging it are one atomic write). Runs of
// consecutive messages go in one DeleteRange each (runs under 128 in point
// Deletes), and the queue-state key moves the head in the same batch.
//
// An ID acknowledges its message while the lease holds, and also after it
// ended as long as nobody has received the message since. Otherwise Ack
// returns an error matching ErrLeaseLost (and tipkv.ErrConflict) naming
// the ID: the message was acknowledged already, released, or delivered
// again. A zero ID or an ID given twice is tipkv.ErrInvalid. Ack is all or
// nothing: when it returns an error, no message was acknowledged. Until
// the write commits the messages stay leased to the caller; if it aborts,
// their leases go on as before.
//
// On a shared engine the write requires each message to hold what this
// process wrote when it leased it (or last extended the lease): a message
// another process took over is ErrLeaseLost, found at commit. Each message
// adds a condition to the batch, so an Ack of more messages than one batch
// of the engine holds (Caps.MaxBatchOps) is tipkv.ErrInvalid: acknowledge
// in groups. An Ack does not write the queue-state key there.
func (q *Queue[T]) Ack(w tipkv.Writer, ids ...ID) error {
	if len(ids) == 0 {
		return nil
	}
	c := q.c
	if c.sm != nil {
		if err := c.ackShared(w, ids); err != nil {
			return fmt.Errorf("queue %q: ack: %w", c.name, err)
		}
		return nil
	}
	err := link.Write(w, func(tx *link.Tx) error {
		if err := c.owns(tx); err != nil {
			return err
		}
		ss, err := c.beginAck(ids)
		if err != nil {
			return err
		}
		tx.OnCommit(func() { c.consumed(ss) })
		tx.OnAbort(func() { c.restore(ss) })
		// es goes with the Tx (its state write reads it when the batch
		// commits, after this returns if w is a *tipkv.Batch): its own.
		es := make([]*entry, len(ss))
		for i, s := range ss {
			es[i] = s.e
		}
		c.writeState(tx, es)
		sc := getScratch()
		defer sc.put()
		sc.seqs = appendSeqs(sc.seqs[:0], es)
		return c.deleteRuns(tx.Batch, sc.seqs, &sc.buf)
	})
	if err != nil {
		return fmt.Errorf("queue %q: ack: %w", c.name, err)
	}
	return nil
}

// beginAck checks ids and marks their messages busy. It returns their
// states before.
func (c *core) beginAck(ids []ID) ([]saved, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, tipkv.ErrClosed
	}
	ss := make([]saved, 0, len(ids))
	defer func() {
		for _, s := range ss {
			s.e.mark = false
		}
	}()
	for _, id := range ids {
		e, err := c.leased(id)
		if err != nil {
			return nil, err
		}
		if e.mark {
			return nil, fmt.Errorf("%w: message id %s given twice", tipkv.ErrInvalid, id)
		}
		e.mark = true
		ss = append(ss, saved{e: e, state: e.state, deadline: e.deadline})
	}
	for _, s := range ss {
		s.e.mark = false
		c.setState(s.e, stBusy, time.Time{})
	}
	return ss, nil
}

// consumed forgets messages whose removal committed.
func (c *core) consumed(ss []saved) {
	c.m.acks.Add(uint64(len(ss)))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range ss {
		if !s.e.removed {
			c.remove(s.e)
		}
	}
}

// Release gives up the lease that id names: the message becomes visible
// again after delay (at once if delay <= 0), by the DB's clock. Its attempt
// count stays as it is. A delay is written to the message (one synced
// write), so it holds across a restart; on Pebble a release without delay
// changes memory only, and on a shared engine every release writes the
// message (requiring it to hold what this process wrote), for the other
// processes to see. An ID that no longer names the message's lease gives
// ErrLeaseLost; a delay that would end after 2262 (see EnqueueAt) is
// tipkv.ErrInvalid, and the lease goes on.
func (q *Queue[T]) Release(id ID, delay time.Duration) error {
	return q.c.release(id, delay, "release")
}

// release is Release; op names the call in errors.
func (c *core) release(id ID, delay time.Duration, op string) error {
	var at time.Time
	if delay > 0 {
		now, err := c.now()
		if err == nil {
			at, err = after(now, delay)
		}
		if err != nil {
			return fmt.Errorf("queue %q: %s message %d: %w", c.name, op, id.seq, err)
		}
	}
	if c.sm != nil {
		if err := c.rewriteHeld(id, at, false); err != nil {
			return fmt.Errorf("queue %q: %s message %d: %w", c.name, op, id.seq, err)
		}
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("queue %q: %s: %w", c.name, op, tipkv.ErrClosed)
	}
	e, err := c.leased(id)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", op, err)
	}
	if delay <= 0 {
		e.lease = 0
		c.setState(e, stReady, time.Time{})
		c.notify()
		c.mu.Unlock()
		return nil
	}
	s := saved{e: e, state: e.state, deadline: e.deadline}
	c.setState(e, stBusy, time.Time{})
	c.mu.Unlock()

	key := c.k.item(nil, e.seq)
	err = link.Write(c.db, func(tx *link.Tx) error {
		v, err := c.store.Get(key)
		if err != nil {
			return err
		}
		h, payload, err := parseHeader(v, itemFormat)
		if err != nil {
			return c.corrupt(e.seq, err)
		}
		h.at = at.UnixNano()
		return tx.Batch.Set(key, append(appendHeader(nil, itemFormat, h), payload...))
	})
	if err != nil {
		c.restore([]saved{s})
		return fmt.Errorf("queue %q: %s message %d: %w", c.name, op, e.seq, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !e.removed {
		e.lease = 0
		c.setState(e, stWaiting, at)
	}
	return nil
}

// Extend sets the lease that id names to end lease from now, by the DB's
// clock. It works while the lease holds, and after it ended as long as
// nobody has received the message since; otherwise it returns
// ErrLeaseLost. lease <= 0, or a lease that would end after 2262, is
// tipkv.ErrInvalid, and the lease goes on as before. On Pebble it changes
// memory only; on a shared engine it writes the lease's new end to the
// message, requiring it to hold what this process wrote.
func (q *Queue[T]) Extend(id ID, lease time.Duration) error {
	c := q.c
	if lease <= 0 {
		return fmt.Errorf("%w: queue %q: extend message %d by %v: want lease > 0", tipkv.ErrInvalid, c.name, id.seq, lease)
	}
	now, err := c.now()
	if err != nil {
		return fmt.Errorf("queue %q: extend message %d: %w", c.name, id.seq, err)
	}
	deadline, err := after(now, lease)
	if err != nil {
		return fmt.Errorf("queue %q: extend message %d: %w", c.name, id.seq, err)
	}
	if c.sm != nil {
		if err := c.rewriteHeld(id, deadline, true); err != nil {
			return fmt.Errorf("queue %q: extend message %d: %w", c.name, id.seq, err)
		}
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("queue %q: extend: %w", c.name, tipkv.ErrClosed)
	}
	c.expire(now) // a lease that ended holds no room
	e, err := c.leased(id)
	if err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	if !e.slot && c.ctl.max > 0 && c.nslots >= c.ctl.max {
		// The lease ended, and its room went to other messages.
		return fmt.Errorf("queue %q: extend message %d (id %s): its lease ended and the queue is at its cap of %d in flight: %w", c.name, id.seq, id, c.ctl.max, ErrLeaseLost)
	}
	c.setState(e, stLeased, deadline)
	return nil
}
