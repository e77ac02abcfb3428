package queue

import (
	"errors"
	"fmt"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/queuefmt"
)

// MaxInFlightLimit is the largest cap SetMaxInFlight takes; on a shared
// engine whose batches or values are small, less: there the leases under
// a cap are counted in one value that every delivery writes, twice in
// its batch, and the cap is what a quarter of a batch holds of them.
const MaxInFlightLimit = queuefmt.MaxInFlight

// control is what a queue's owner set about its deliveries, as the
// queue-control key holds it (absent: the zero control).
type control struct {
	paused bool
	max    int // the most messages leased at once; 0: no cap
	// counted says leases holds every lease of the queue that may not
	// have ended (a capped queue on a shared engine; see
	// control_shared.go). Pebble counts leases in memory.
	counted bool
	leases  []capLease // by seq, increasing
}

// capLease is a message leased until end (Unix ns), as a shared engine's
// control key counts it.
type capLease = queuefmt.Lease

func appendControl(dst []byte, ct control) []byte {
	return queuefmt.AppendControl(dst, queuefmt.Control{Paused: ct.paused, MaxInFlight: ct.max, Counted: ct.counted, Leases: ct.leases})
}

func parseControl(v []byte) (control, error) {
	ct, err := queuefmt.ParseControl(v)
	return control{paused: ct.Paused, max: ct.MaxInFlight, counted: ct.Counted, leases: ct.Leases}, err
}

// setMax sets the cap to n. The leases counted go with a change from or
// to no cap: a cap set anew counts them again (on a shared engine, the
// first delivery under it does).
func (ct *control) setMax(n int) {
	if n == 0 || ct.max == 0 {
		ct.counted, ct.leases = false, nil
	}
	ct.max = n
}

// Pause stops the queue's deliveries, through w: a *tipkv.DB commits at
// once, a *tipkv.Batch with the rest of its Update (so that, say, the
// last Enqueue of a batch job and the pause are one write). Once it has
// committed, Receive, ReceiveWait and Pop deliver nothing, on every
// handle of the queue and, on a shared engine, in every process, until
// Resume; the pause is stored, so it outlives a restart. Receive and Pop
// then return no messages and no error, as when nothing is visible (they
// do not move messages to the dead-letter queue either), and Wait and
// ReceiveWait block until the queue is resumed (or ctx ends, or the DB
// closes): a consumer loop sleeps through a pause without polling.
//
// Everything else goes on: Enqueue, Peek, Inspect, Stats, Ack, Release,
// Retry and Extend, DeadLetters, Requeue and Discard. Messages leased
// before the pause stay leased to their consumers, who may Ack them; a
// lease that ends is not taken again until the queue is resumed. Pausing
// a paused queue changes nothing.
//
// On Pebble the pause also lives in memory, loaded by Open and set when
// the write is applied, so a Receive pays nothing for it. On a shared
// engine Pause reads the queue's control key and requires it unchanged
// at commit (if another process changed it first, a *tipkv.DB reads again
// and retries; an Update's function runs again), and every delivering
// write requires the control key to hold what the process last read, so a
// delivery that raced with a Pause in another process fails at commit and
// delivers nothing.
func (q *Queue[T]) Pause(w tipkv.Writer) error {
	return q.c.setControl(w, "pause", func(ct *control) { ct.paused = true })
}

// Resume undoes Pause, through w as Pause does: deliveries start again
// and every Wait and ReceiveWait of the queue wakes, in this process at
// once and, on a shared engine, in the others by the same wake-up that an
// Enqueue gives them (Resume writes the queue-state key again, unchanged,
// so that the engine's watch or notification fires). Resuming a queue
// that is not paused changes nothing.
func (q *Queue[T]) Resume(w tipkv.Writer) error {
	return q.c.setControl(w, "resume", func(ct *control) { ct.paused = false })
}

// Paused reports whether the queue is paused. On Pebble it reads memory;
// on a shared engine it reads the queue's control key (one read), so it
// sees a Pause or Resume of any process once that has committed.
func (q *Queue[T]) Paused() (bool, error) {
	ct, err := q.c.readControl()
	if err != nil {
		return false, fmt.Errorf("queue %q: paused: %w", q.c.name, err)
	}
	return ct.paused, nil
}

// SetMaxInFlight caps at n the messages of the queue leased at once:
// received and not yet acknowledged, released, retried or lapsed, across
// every handle and, on a shared engine, every process. 0 removes the cap.
// It goes through w as Pause does, and is stored as a pause is: it
// outlives a restart, and every handle and process heeds it once it has
// committed.
//
// Under the cap a Receive takes no more than the room left and returns
// that many messages or fewer (none, and no error, at the cap), and Wait
// and ReceiveWait block while the queue is at its cap, until an Ack,
// Release, Retry or a lease that ends makes room (or the cap is raised).
// Pop leases nothing and is not capped. Lowering the cap below the
// messages leased now takes no lease back: Receives deliver nothing until
// enough of them are done. Extend of a lease that has ended (which
// takes the message again) needs room as a Receive does, and returns an
// error matching ErrLeaseLost at the cap.
//
// On Pebble the cap and the count of messages in flight live in memory,
// and a Receive pays nothing for them. On a shared engine the leases
// under a cap are counted in the control key: every Receive, Ack,
// Release, Retry and Extend of a capped queue reads the key and writes it
// with its change, requiring it unchanged. The count is thus exact across
// processes (two Receives that each saw room for one cannot both commit),
// and a lease that lapses leaves it Caps.ClockSkew after its end, when
// its message becomes another process's to take. The price is that the
// consumers of a capped queue take turns on that key: their writes
// conflict and are retried (by a *tipkv.DB at once, up to 100 times; an
// Ack in an Update runs the Update's function again), so a capped queue
// delivers and acknowledges one write at a time across processes. The
// first Receive under a cap set anew reads every live message once, to
// count the leases taken before it. A Wait in another process sees the
// room an Ack makes through the engine's watch of the items, or within
// Caps.PollInterval where they are not watched (PostgreSQL's default
// notifications leave the items family out).
//
// n < 0 or n > MaxInFlightLimit is tipkv.ErrInvalid, and nothing is
// written.
func (q *Queue[T]) SetMaxInFlight(w tipkv.Writer, n int) error {
	limit := MaxInFlightLimit
	if q.c.sm != nil {
		limit = q.c.sm.maxCap
	}
	if n < 0 || n > limit {
		return fmt.Errorf("%w: queue %q: max in flight %d: want 0 (no cap) to %d", tipkv.ErrInvalid, q.c.name, n, limit)
	}
	return q.c.setControl(w, "set max in flight", func(ct *control) { ct.setMax(n) })
}

// setControl changes the queue's control key through w: change edits what
// the key holds when the write commits (on Pebble, what memory holds when
// the batch is prepared).
func (c *core) setControl(w tipkv.Writer, op string, change func(*control)) error {
	var err error
	if c.sm != nil {
		err = c.write(w, func(tx *link.Tx) error {
			if err := c.owns(tx); err != nil {
				return err
			}
			return c.setControlShared(tx, change)
		})
	} else {
		err = link.Write(w, func(tx *link.Tx) error {
			if err := c.owns(tx); err != nil {
				return err
			}
			if err := c.checkOpen(); err != nil {
				return err
			}
			c.writeControl(tx, change)
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("queue %q: %s: %w", c.name, op, err)
	}
	return nil
}

// readControl returns the queue's control: memory on Pebble, the store on
// a shared engine.
func (c *core) readControl() (control, error) {
	if c.sm != nil {
		if err := c.checkOpen(); err != nil {
			return control{}, err
		}
		ct, _, err := c.loadControlShared()
		return ct, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.ctl, tipkv.ErrClosed
	}
	return c.ctl, nil
}

// loadControl reads the control key: the zero control if it is absent.
func (c *core) loadControl() (control, []byte, error) {
	v, err := c.store.Get(c.k.control)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return control{}, nil, nil
	case err != nil:
		return control{}, nil, err
	}
	ct, err := parseControl(v)
	if err != nil {
		return control{}, nil, fmt.Errorf("control key %x: %w", c.k.control, err)
	}
	return ct, v, nil
}

// controlWrite is a Tx's changes to one queue's control key (Pebble),
// applied in order to the newest control when the batch is prepared.
type controlWrite struct {
	c       *core
	changes []func(*control)
	ct      control // the value written
}

// writeControl makes tx write c's control key with change applied, on
// Pebble. The value is computed under the state lock just before the
// batch is applied, from the control memory holds then (see txState), so
// that two writes of the key apply in the order their values were
// computed and memory ends as the store does.
func (c *core) writeControl(tx *link.Tx, change func(*control)) {
	ts := c.txState(tx)
	for i := range ts.controls {
		if w := &ts.controls[i]; w.c == c {
			w.changes = append(w.changes, change)
			return
		}
	}
	ts.controls = append(ts.controls, controlWrite{c: c, changes: []func(*control){change}})
}

// setCtl records ct as the queue's control once its write is applied.
// Deliveries it allows again wake the Waits.
func (c *core) setCtl(ct control) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.ctl
	c.ctl = ct
	if opens(was, ct) {
		c.notify()
	}
}

// room is how many of limit messages memory lets a Receive (lease set)
// or a Pop take now: none while the queue is paused, and for a Receive no
// more than the room under the cap. The caller holds mu (Pebble).
func (c *core) room(lease bool, limit int) int {
	switch {
	case c.ctl.paused:
		return 0
	case lease && c.ctl.max > 0:
		return max(min(limit, c.ctl.max-c.nslots), 0)
	}
	return limit
}
