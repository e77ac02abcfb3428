package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// Wait blocks until a message is visible and Receive may take it, then
// returns nil; Receive may still find nothing if another consumer is
// faster. While the queue is paused it blocks until a Resume (and a
// visible message), and while the queue is at its cap on messages in
// flight (SetMaxInFlight), until an Ack, Release, Retry or lapsed lease
// makes room. It returns ctx.Err() when ctx ends first, and an error
// matching tipkv.ErrClosed when the DB closes. ReceiveWait does both in
// one call.
//
// On Pebble, Wait does not poll. It sleeps on an in-process notification
// that commits fire once they have returned (enqueues in this process,
// releases, failed writes that make messages visible again), and on a
// timer set to the earliest moment a lease or a delay ends (none while
// paused: a Resume notifies). A DB belongs to one process, so every
// enqueue, pause and resume comes through this notification.
//
// On a shared engine, Wait reads the queue from its head and sleeps until
// the engine reports a change to the queue's state key (every enqueue
// writes it) or to its messages (Release and Retry write those), or a
// timer for the earliest lease end (plus Caps.ClockSkew) or delay it read
// fires; then it reads again. An engine that cannot watch is read again
// every Caps.PollInterval (1s if unset): a Wait there returns up to that
// long after the message became visible. On PostgreSQL (sqlkv) only the
// queue-state family notifies by default, so an enqueue wakes a Wait at
// once and a Release by another process within the poll interval.
//
// Visibility follows the DB's clock (tipkv.Options.Clock), but the timer
// runs on the wall clock: it sleeps for as long as the DB's clock says is
// left, then checks again. With an injected clock that jumps, call Wake
// after moving it, and every Wait checks again at once. (An injected clock
// that stands still does not make Wait spin: while the timer finds the
// clock where it was, each sleep is twice the last, up to a second.)
func (q *Queue[T]) Wait(ctx context.Context) error {
	c := q.c
	if c.sm != nil {
		return c.waitShared(ctx)
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var set time.Time       // the clock when the timer was set
	var sleep time.Duration // what it was set to
	fired := false
	for {
		wake := c.dq.wakeCh()
		ch, left, now, err := c.visible()
		if err != nil || ch == nil {
			if err != nil {
				err = fmt.Errorf("queue %q: wait: %w", c.name, err)
			}
			return err
		}
		var tc <-chan time.Time
		if left > 0 {
			sleep = timerSleep(left, sleep, fired && now.Equal(set))
			set = now
			if timer == nil {
				timer = time.NewTimer(sleep)
			} else {
				timer.Reset(sleep)
			}
			tc = timer.C
		}
		fired = false
		select {
		case <-ch:
		case <-wake:
		case <-tc:
			fired = true
		case <-ctx.Done():
			err = ctx.Err()
		case <-c.closedCh:
			err = fmt.Errorf("queue %q: wait: %w", c.name, tipkv.ErrClosed)
		}
		c.mu.Lock()
		c.sleepers--
		c.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// maxStalledSleep bounds the sleeps of a Wait whose clock stands still.
const maxStalledSleep = time.Second

// timerSleep is how long Wait's timer sleeps when the clock says left is
// left until the next deadline, and the last sleep was last. stalled says
// the last sleep ended on the timer and the clock had not moved since:
// then the sleep doubles (up to maxStalledSleep, never below left), so that
// a clock that stands still cannot make Wait spin.
func timerSleep(left, last time.Duration, stalled bool) time.Duration {
	if !stalled {
		return left
	}
	return max(left, min(2*last, maxStalledSleep))
}

// Wake makes every Wait and ReceiveWait on the queues of db check again
// what is visible now by the DB's clock. Call it after moving an injected
// clock (tipkv.Options.Clock) forward, so that leases and delays that have
// ended by the new time take effect at once; with the default clock it is
// never needed. Wake of a nil DB does nothing.
func Wake(db *tipkv.DB) {
	ln, err := link.Of(db)
	if err != nil {
		return
	}
	dq := dbQueuesOf(&ln.Services)
	dq.mu.Lock()
	defer dq.mu.Unlock()
	close(dq.wake)
	dq.wake = make(chan struct{})
}

// visible returns a nil channel when a message is visible now. Otherwise
// it returns the channel that the next change closes, how long until the
// earliest time a leased or waiting message becomes visible (zero if
// none), and the clock's now, and counts the caller as asleep until it
// decrements sleepers.
func (c *core) visible() (<-chan struct{}, time.Duration, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, 0, time.Time{}, tipkv.ErrClosed
	}
	now, err := c.now()
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	c.expire(now)
	if c.ctl.paused {
		// Nothing to wait for but a Resume, which notifies.
		c.sleepers++
		return c.changedLocked(), 0, now, nil
	}
	full := c.room(true, 1) == 0 // the cap holds Receive back
	if c.nready > 0 && !full {
		return nil, 0, now, nil
	}
	if c.fresh > 0 && !full {
		ok, err := c.freshVisible(now)
		if err != nil || ok {
			return nil, 0, now, err
		}
	}
	var left time.Duration
	if deadline, ok := c.nextDeadline(); ok {
		// At least 1ns: a deadline that passes between expire and here
		// still needs a timer.
		left = max(deadline.Sub(now), 1)
	}
	c.sleepers++
	return c.changedLocked(), left, now, nil
}

// freshVisible reports whether a message in [cursor, watermark) is visible
// at now. Delayed messages it passes on the way are set aside as waiting,
// and messages behind their group's window as blocked, so that the next
// call does not read them again; the visible one it finds becomes ready.
func (c *core) freshVisible(now time.Time) (bool, error) {
	it, err := engine.NewIterN(c.store, c.k.item(nil, c.cursor), c.k.item(nil, c.watermark), 1) // usually the first answers
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
		if err != nil || (len(h.group) == 0 && h.at <= nowNS) {
			return true, closeIter(it) // Receive deals with corrupt ones
		}
		e := &entry{seq: seq, state: stBusy}
		c.addEntry(e)
		c.cursor = seq + 1
		c.fresh = max(c.fresh-1, 0)
		if c.admit(e, h, nowNS) {
			// A message of a group, in its window: Receive reads it
			// again, from the ready heap.
			c.setState(e, stReady, time.Time{})
			return true, closeIter(it)
		}
	}
	if err := closeIter(it); err != nil {
		return false, err
	}
	c.cursor, c.fresh = c.watermark, 0
	return false, nil
}
