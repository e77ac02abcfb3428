package queue

import (
	"encoding/binary"
	"sync"

	"github.com/tipkv/tipkv/internal/link"
)

// dbQueues is what every queue of one DB has in common (the order of
// queue-state writes, the wake-up of waiters); it lives in the DB's
// link.Registry. (It is not the shared-engine mode: "shared" in this
// package means only that, Caps.Shared, as in shared_*.go.)
type dbQueues struct {
	// stateMu orders the writes of queue-state and control keys (Pebble;
	// both the same way, in one txState per Tx). A Tx that writes one
	// takes stateMu in its OnPrepare hook, computes the values there, and
	// holds it until its batch is applied (or will not be): state values
	// are applied in the order they were computed, so a batch prepared
	// early and committed late can never overwrite a newer value with an
	// older one. It is one lock for the DB, not one per queue, because an
	// Update may write the state of several queues, and locks taken per
	// queue in hook order could deadlock. It is held only across the
	// memtable apply, never across a WAL sync.
	stateMu sync.Mutex

	mu   sync.Mutex
	wake chan struct{} // closed and replaced by Wake
}

func dbQueuesOf(reg *link.Registry) *dbQueues {
	return reg.Get(dbQueuesKey{}, func() any { return &dbQueues{wake: make(chan struct{})} }).(*dbQueues)
}

// wakeCh returns the channel that the next Wake closes.
func (dq *dbQueues) wakeCh() <-chan struct{} {
	dq.mu.Lock()
	defer dq.mu.Unlock()
	return dq.wake
}

type dbQueuesKey struct{}

// txState is the queue-state writes of one Tx, in the Tx's State under
// txStateKey. It is recycled (txStates) once its Tx is applied or aborted,
// with its hooks bound to it once, so that a write that carries a state
// allocates nothing for it.
type txState struct {
	dq       *dbQueues // nil until the hooks are registered
	tx       *link.Tx
	writes   []stateWrite // one per queue, in order of first use
	one      [1]stateWrite
	controls []controlWrite // one per queue whose control key tx writes
	buf      [1 + 4*binary.MaxVarintLen64]byte
	locked   bool // dq.stateMu is held

	// The hooks, bound once when the txState is made.
	prepareFn func() error
	appliedFn func()
	abortFn   func()
}

var txStates sync.Pool

func init() {
	txStates.New = func() any {
		ts := new(txState)
		ts.prepareFn, ts.appliedFn, ts.abortFn = ts.prepare, ts.applied, ts.aborted
		return ts
	}
}

func newTxState() any { return txStates.Get() }

type txStateKey struct{}

// stateWrite is the state a Tx writes for one queue: computed in the
// prepare hook from what the Tx consumes, recorded once applied.
type stateWrite struct {
	c        *core
	consumed []*entry
	st       state
	enq      int64 // c.enqueued when st was computed
}

// writeState makes tx write c's queue-state key, with the head moved past
// es (which tx consumes) and the tail at the next sequence number to
// assign, both computed just before the batch is applied. Several calls in
// one Tx for one queue add up. es is the caller's until tx is applied or
// aborted: it must not change it meanwhile.
func (c *core) writeState(tx *link.Tx, es []*entry) {
	// (Allocations matter here: an Ack of one message runs this.)
	ts := c.txState(tx)
	for i := range ts.writes {
		if w := &ts.writes[i]; w.c == c {
			w.consumed = append(w.consumed, es...)
			return
		}
	}
	ts.writes = append(ts.writes, stateWrite{c: c, consumed: es})
}

// txState returns tx's queue-state writes, registering their hooks on
// first use.
func (c *core) txState(tx *link.Tx) *txState {
	ts := tx.State(txStateKey{}, newTxState).(*txState)
	if ts.dq == nil {
		ts.dq, ts.tx, ts.writes = c.dq, tx, ts.one[:0]
		tx.OnPrepare(ts.prepareFn)
		tx.OnApplied(ts.appliedFn)
		tx.OnAbort(ts.abortFn)
	}
	return ts
}

// prepare takes the state lock and adds the state and control values to
// the batch. If it fails, the Tx aborts and aborted runs.
func (ts *txState) prepare() error {
	ts.dq.stateMu.Lock()
	ts.locked = true
	for i := range ts.writes {
		w := &ts.writes[i]
		w.st, w.enq = w.c.stateFor(w.consumed)
		// The batch copies the value, so one buffer serves every queue.
		if err := ts.tx.Batch.Set(w.c.k.state, appendState(ts.buf[:0], w.st)); err != nil {
			return err
		}
	}
	for i := range ts.controls {
		w := &ts.controls[i]
		w.c.mu.Lock()
		w.ct = w.c.ctl
		w.c.mu.Unlock()
		for _, change := range w.changes {
			change(&w.ct)
		}
		if err := ts.tx.Batch.Set(w.c.k.control, appendControl(ts.buf[:0], w.ct)); err != nil {
			return err
		}
	}
	return nil
}

// applied records the values as the queues' newest stored state and
// control, releases the lock and recycles ts: the Tx runs none of its
// hooks after this.
func (ts *txState) applied() {
	for i := range ts.writes {
		w := &ts.writes[i]
		w.c.stored(w.st, w.enq)
	}
	for i := range ts.controls {
		w := &ts.controls[i]
		w.c.setCtl(w.ct)
	}
	ts.unlock()
	ts.recycle()
}

// aborted releases the lock, if prepare took it, and recycles ts: an
// aborted Tx runs no other hook.
func (ts *txState) aborted() {
	ts.unlock()
	ts.recycle()
}

func (ts *txState) unlock() {
	if ts.locked {
		ts.locked = false
		ts.dq.stateMu.Unlock()
	}
}

// recycle empties ts and pools it. The Tx's State still names ts until
// the Tx is released, but nothing reads it there after the Tx is applied
// or aborted (writeState runs only while the Update's function does).
func (ts *txState) recycle() {
	if cap(ts.writes) > 64 {
		ts.writes = nil
	}
	clear(ts.writes[:cap(ts.writes)])
	ts.dq, ts.tx, ts.writes, ts.controls = nil, nil, ts.writes[:0], nil
	txStates.Put(ts)
}

// stateFor is the queue-state value for a batch that consumes es, computed
// under the state lock. head is the oldest message the batch leaves
// unconsumed, counting every other write in flight as not done, or the
// head last stored if that is later: a batch applied before this one
// (whose commit has not returned yet, so memory still counts its messages)
// may have stored a later head, and the stored head never moves back. The
// stored value describes every batch applied before it too, and a crash
// never keeps a later write while losing an earlier one. tail is the next
// sequence number to assign, which only grows.
//
// count is exact for the messages below countTo, the watermark: every
// enqueue below it has committed or aborted, so the messages committed
// since the last stored state are known, and the consumes applied before
// this batch are in the last stored count. (A batch applied before this
// one but not yet returned does not matter: its own count was stored.)
// It returns the count of enqueued messages the value includes.
func (c *core) stateFor(es []*entry) (state, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return state{
		head:    max(c.last.head, c.headWithout(es)),
		tail:    max(c.last.tail, c.next),
		counted: true,
		count:   max(c.last.count+(c.enqueued-c.lastEnqueued)-int64(len(es)), 0),
		countTo: max(c.last.countTo, c.watermark),
	}, c.enqueued
}

// stored records st as applied; it counted enq enqueued messages.
func (c *core) stored(st state, enq int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last, c.lastEnqueued = st, enq
}
