package queue

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/queuefmt"
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
// hint was read yet, or the hint says the queue is paused or capped (a
// capped queue's key changes with every lease); then it reads the key.
func (c *core) controlShared(fresh bool) (control, []byte, error) {
	c.mu.Lock()
	ct, raw, ok := c.sm.ctl, c.sm.ctlRaw, c.sm.ctlKnown && !fresh && !c.sm.ctl.paused && c.sm.ctl.max == 0
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

// A cap on a shared engine. The leases of a capped queue are counted in
// its control key (control.leases, tag 0x02): every write that takes a
// lease (Receive), ends one (Ack, Release, Retry) or moves its end
// (Extend) reads the key and writes it with its change, requiring it
// unchanged, so that the count is exact whatever the processes do at
// once: two deliveries that each saw room for one cannot both commit. A
// lease that lapses drops out of the count ClockSkew after its end, when
// another process may take its message over. Messages leased before the
// cap was set are not in the key yet (tag 0x01 with a cap): the first
// delivery or Extend under the cap counts them, reading every live item,
// and writes the count; a write of an older hint fails at commit, since
// the cap changed the key.

// liveLeases returns the leases of ls that have not ended by nowNS, by the
// shared engine's rule: ClockSkew after their end. The result is new.
func (m *sharedMem) liveLeases(ls []capLease, nowNS int64) []capLease {
	out := make([]capLease, 0, len(ls)+1)
	for _, l := range ls {
		if m.visibleAt(header{at: l.End}, true) > nowNS {
			out = append(out, l)
		}
	}
	return out
}

// countLeases fills ct's leases from the items: every lease stored that
// has not ended by nowNS. It reads every live item of the queue.
func (c *core) countLeases(ct *control, nowNS int64) error {
	var ls []capLease
	err := c.scan(1024, func(seq int64, v []byte) (bool, error) {
		h, leased, _, err := parseItem(v)
		if err == nil && leased && c.sm.visibleAt(h, true) > nowNS {
			if len(ls) == queuefmt.MaxInFlight {
				return false, fmt.Errorf("%w: over %d messages leased: the cap cannot count them until fewer are", tipkv.ErrConflict, queuefmt.MaxInFlight)
			}
			ls = append(ls, capLease{Seq: seq, End: h.at})
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	ct.counted, ct.leases = true, ls
	return nil
}

// withLeases returns ls without the leases of seqs (sorted), with add
// (sorted, none in ls) merged in, in order of seq.
func withLeases(ls []capLease, seqs []int64, add []capLease) []capLease {
	out := make([]capLease, 0, len(ls)+len(add))
	for _, l := range ls {
		if _, found := slices.BinarySearch(seqs, l.Seq); !found {
			out = append(out, l)
		}
	}
	out = append(out, add...)
	slices.SortFunc(out, func(a, b capLease) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// useControl is the control key for a write of tx that ends or moves
// leases (Ack, Release, Retry, Extend): read now if the hint may be stale
// (see controlShared; a capped queue's is always read), and required
// unchanged at commit. If tx aborts, the hint is read again next time,
// in case a change of the key was why.
func (c *core) useControl(tx *link.Tx) (control, []byte, error) {
	ct, raw, err := c.controlShared(false)
	if err != nil {
		return control{}, nil, err
	}
	tx.OnAbort(func() {
		c.mu.Lock()
		c.sm.ctlKnown = false
		c.mu.Unlock()
	})
	return ct, raw, c.requireControl(tx.Batch, raw)
}

// setLeases adds to tx the write of the control key ct with leases ls,
// counted, and returns what it writes.
func (c *core) setLeases(tx *link.Tx, ct control, ls []capLease) (control, []byte, error) {
	ct.counted, ct.leases = true, ls
	v := appendControl(nil, ct)
	return ct, v, tx.Batch.Set(c.k.control, v)
}
