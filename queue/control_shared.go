package queue

import (
	"errors"

	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// The control key on a shared engine (see control.go). Every process
// keeps what it last read of the key as a hint (sharedMem.ctl): a
// delivery trusts a hint that lets it deliver, and requires at commit
// that the key still holds those bytes, so a Pause or SetMaxInFlight that
// another process committed meanwhile makes it fail and read again. A
// hint that forbids delivering is read again before it is believed: a
// paused process reads the key once per Receive, and once per wake-up of
// a Wait, and finds a Resume that way.

// loadControlShared reads the control key and keeps it as the process's
// hint.
func (c *core) loadControlShared() (control, []byte, error) {
	ct, raw, err := c.loadControl()
	if err != nil {
		return control{}, nil, err
	}
	c.mu.Lock()
	c.sm.ctl, c.sm.ctlRaw, c.sm.ctlKnown = ct, raw, true
	c.mu.Unlock()
	return ct, raw, nil
}

// controlShared returns the queue's control and its stored bytes (nil:
// absent) for a delivery or a Wait: the hint, unless fresh is set, no
// hint was read yet or the hint says the queue is paused; then it reads
// the key.
func (c *core) controlShared(fresh bool) (control, []byte, error) {
	c.mu.Lock()
	ct, raw, ok := c.sm.ctl, c.sm.ctlRaw, c.sm.ctlKnown && !fresh && !c.sm.ctl.paused
	c.mu.Unlock()
	if ok {
		return ct, raw, nil
	}
	return c.loadControlShared()
}

// requireControl adds to b the condition that the control key holds raw
// (nil: that it is absent).
func (c *core) requireControl(b engine.Batch, raw []byte) error {
	if raw == nil {
		return b.Require(engine.Absent(c.k.control))
	}
	return b.Require(engine.Equals(c.k.control, raw))
}

// setControlShared adds to tx the write of the control key with change
// applied to what it holds now, and the condition that it still holds
// that at commit. A change that lets deliveries start again (a Resume, a
// higher cap) also writes the queue-state key again, unchanged and on the
// same condition, so that the Waits of every process wake as they do for
// an Enqueue (they watch that key, and on PostgreSQL its family
// notifies).
func (c *core) setControlShared(tx *link.Tx, change func(*control)) error {
	was, raw, err := c.loadControl()
	if err != nil {
		return err
	}
	ct := was
	change(&ct)
	if err := c.requireControl(tx.Batch, raw); err != nil {
		return err
	}
	val := appendControl(nil, ct)
	if err := tx.Batch.Set(c.k.control, val); err != nil {
		return err
	}
	tx.OnCommit(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.sm.ctl, c.sm.ctlRaw, c.sm.ctlKnown = ct, val, true
		c.notify()
	})
	if !opens(was, ct) {
		return nil
	}
	if a := tx.State(sharedAllocKey{c}, func() any { return &sharedAlloc{c: c, tx: tx} }).(*sharedAlloc); a.loaded {
		return nil // the Tx enqueues: it writes the state key already
	}
	v, err := c.store.Get(c.k.state)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return nil // nothing was ever enqueued: no Wait has anything to wake for
	case err != nil:
		return err
	}
	if err := tx.Batch.Require(engine.Equals(c.k.state, v)); err != nil {
		return err
	}
	return tx.Batch.Set(c.k.state, v)
}

// opens reports whether going from control was to ct lets deliveries
// start again that was held back: a Resume, or a cap raised or removed.
func opens(was, ct control) bool {
	return (was.paused && !ct.paused) || (was.max > 0 && (ct.max == 0 || ct.max > was.max))
}
