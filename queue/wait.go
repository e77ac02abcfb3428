package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
)

// Wait blocks until a message is visible, then returns nil; Receive may
// still find nothing if another consumer is faster. It returns ctx.Err()
// when ctx ends first, and an error matching tipkv.ErrClosed when the DB
// closes.
//
// Wait does not poll. It sleeps on an in-process notification that commits
// fire once they have returned (enqueues in this process, releases, failed
// writes that make messages visible again), and on a timer set to the
// earliest moment a lease or a delay ends. A DB belongs to one process, so
// every enqueue comes through this notification.
func (q *Queue[T]) Wait(ctx context.Context) error {
	c := q.c
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ch, deadline, err := c.visible(time.Now())
		if err != nil || ch == nil {
			if err != nil {
				err = fmt.Errorf("queue %q: wait: %w", c.name, err)
			}
			return err
		}
		var tc <-chan time.Time
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			tc = timer.C
		}
		select {
		case <-ch:
		case <-tc:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closedCh:
			return fmt.Errorf("queue %q: wait: %w", c.name, tipkv.ErrClosed)
		}
	}
}

// visible returns a nil channel when a message is visible at now.
// Otherwise it returns the channel that the next change closes, and the
// earliest time a leased or waiting message becomes visible (zero if
// none).
func (c *core) visible(now time.Time) (<-chan struct{}, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, time.Time{}, tipkv.ErrClosed
	}
	c.expire(now)
	if c.nready > 0 {
		return nil, time.Time{}, nil
	}
	if c.fresh > 0 {
		ok, err := c.freshVisible(now)
		if err != nil || ok {
			return nil, time.Time{}, err
		}
	}
	deadline, _ := c.nextDeadline()
	return c.changed, deadline, nil
}

// freshVisible reports whether a message in [cursor, watermark) is visible
// at now. Delayed messages it passes on the way are set aside as waiting,
// so that the next call does not read them again.
func (c *core) freshVisible(now time.Time) (bool, error) {
	it, err := c.store.NewIter(c.k.item(nil, c.cursor), c.k.item(nil, c.watermark))
	if err != nil {
		return false, err
	}
	nowNS := now.UnixNano()
	for ok := it.First(); ok; ok = it.Next() {
		seq, err := seqOf(c.k.itemPrefix, it.Key())
		if err != nil {
			_ = it.Close()
			return false, err
		}
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return false, err
		}
		h, _, err := parseHeader(v, itemFormat)
		if err != nil || h.at <= nowNS {
			return true, closeIter(it) // Receive deals with corrupt ones
		}
		e := &entry{seq: seq, state: stBusy}
		c.addEntry(e)
		c.setState(e, stWaiting, time.Unix(0, h.at))
		c.cursor = seq + 1
		c.fresh = max(c.fresh-1, 0)
	}
	if err := closeIter(it); err != nil {
		return false, err
	}
	c.cursor, c.fresh = c.watermark, 0
	return false, nil
}
