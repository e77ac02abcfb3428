package queue

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tipkv/tipkv"
)

// waitShared is Wait on a shared engine. It reads the queue from its head
// and, while nothing is visible, sleeps until one of these: the engine
// reports a change to the queue's state key (every enqueue writes it) or
// to its items (Release and Retry write those), or, on an engine that
// cannot watch, the next poll; the moment the earliest delay ends, or the
// earliest lease ends plus Caps.ClockSkew (nothing is written when a lease
// lapses); a commit of this process; Wake; ctx; Close. Then it reads
// again.
func (c *core) waitShared(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stateCh, itemsCh <-chan struct{}
	var tick <-chan time.Time
	if c.sm.watcher == nil {
		t := time.NewTicker(c.sm.poll)
		defer t.Stop()
		tick = t.C
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	stateEnd := append(c.k.state[:len(c.k.state):len(c.k.state)], 0)
	var set time.Time       // the clock when the timer was set
	var sleep time.Duration // what it was set to
	fired := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Watch before reading: no change after the read is missed.
		var err error
		if c.sm.watcher != nil && stateCh == nil {
			if stateCh, err = c.sm.watcher.Watch(wctx, c.k.state, stateEnd); err != nil {
				return c.waitErr(ctx, err)
			}
		}
		if c.sm.watcher != nil && itemsCh == nil {
			if itemsCh, err = c.sm.watcher.Watch(wctx, c.k.itemPrefix, c.k.itemEnd); err != nil {
				return c.waitErr(ctx, err)
			}
		}
		wake := c.dq.wakeCh()
		local, err := c.changedCh()
		if err != nil {
			return c.waitErr(ctx, err)
		}
		now, err := c.now()
		if err != nil {
			return c.waitErr(ctx, err)
		}
		// Paused: sleep until a change, without reading the items (a
		// Resume writes the state key, which wakes this Wait). At the
		// cap: until a change, or the earliest lease counted lapses.
		ct, _, err := c.controlShared(false)
		if err != nil {
			return c.waitErr(ctx, err)
		}
		next, full := c.capFull(ct, now)
		if !ct.paused && !full {
			visible := false
			if next, visible, err = c.nextVisible(now); err != nil {
				return c.waitErr(ctx, err)
			}
			if visible {
				return nil
			}
		}
		var tc <-chan time.Time
		if next > 0 {
			// At least 1ns: a time that passes between the read and here
			// still needs a timer.
			left := time.Duration(max(next-now.UnixNano(), 1))
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
		c.sleeping(1)
		select {
		case _, ok := <-stateCh:
			if !ok {
				stateCh = nil // the watch broke: watch again
			}
		case _, ok := <-itemsCh:
			if !ok {
				itemsCh = nil
			}
		case <-tick:
		case <-local:
		case <-wake:
		case <-tc:
			fired = true
		case <-ctx.Done():
			err = ctx.Err()
		case <-c.closedCh:
			err = fmt.Errorf("queue %q: wait: %w", c.name, tipkv.ErrClosed)
		}
		c.sleeping(-1)
		if err != nil {
			return err
		}
	}
}

// capFull reports whether the leases that ct counts fill its cap at now,
// and then the earliest time, in Unix ns, that one of them lapses. A cap
// whose leases are not counted yet is not full: the next Receive counts
// them.
func (c *core) capFull(ct control, now time.Time) (int64, bool) {
	if ct.max == 0 || !ct.counted {
		return 0, false
	}
	live := c.sm.liveLeases(ct.leases, now.UnixNano())
	if len(live) < ct.max {
		return 0, false
	}
	next := int64(math.MaxInt64)
	for _, l := range live {
		next = min(next, c.sm.visibleAt(header{at: l.End}, true))
	}
	return next, true
}

// waitErr wraps an error of Wait's reads, or returns ctx's error if ctx
// ended meanwhile (a watch fails when its context ends).
func (c *core) waitErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("queue %q: wait: %w", c.name, err)
}

// changedCh returns the channel that the next local change closes.
func (c *core) changedCh() (<-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, tipkv.ErrClosed
	}
	return c.changedLocked(), nil
}

// sleeping counts goroutines asleep in Wait.
func (c *core) sleeping(d int) {
	c.mu.Lock()
	c.sleepers += d
	c.mu.Unlock()
}

// nextVisible reads a shared queue from its head: visible says an item is
// visible at now (or corrupt: Receive deals with it); otherwise next is
// the earliest time, in Unix ns, that an item becomes visible by the
// items read (0: none).
func (c *core) nextVisible(now time.Time) (next int64, visible bool, err error) {
	nowNS := now.UnixNano()
	next = math.MaxInt64
	wins := windows{size: c.window}
	c.loadRuns(&wins)
	err = c.scanJumping(64, func(seq int64, v []byte) (bool, error) {
		claimed := c.claimed(seq)
		h, leased, _, err := parseItem(v)
		if wins.item(seq, h, err == nil) {
			// Its window opens when an older message of its group is
			// consumed: a write, which wakes this Wait.
			return true, nil
		}
		if claimed {
			// A delivery of this process is taking it; if it fails, it
			// wakes this Wait.
			return true, nil
		}
		if err != nil {
			visible = true
			return false, nil
		}
		at := c.sm.visibleAt(h, leased)
		if at <= nowNS {
			visible = true
			return false, nil
		}
		next = min(next, at)
		return true, nil
	}, wins.jump)
	if err == nil {
		c.storeRuns(&wins)
	}
	if err != nil || visible || next == math.MaxInt64 {
		return 0, visible, err
	}
	return next, false, nil
}
