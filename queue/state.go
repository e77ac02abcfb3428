package queue

import (
	"encoding/binary"
	"sync"

	"github.com/tipkv/tipkv/internal/knobs"
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

// stateWrite is the state a Tx writes for one queue: decided in the
// prepare hook from what the Tx consumes, recorded once applied.
type stateWrite struct {
	c        *core
	consumed []*entry
	write    bool // the Tx writes st; if not, its consumes extend the run to front
	st       state
	enq      int64 // c.enqueued when st was computed
	front    int64
}

// writeState makes tx account for what it consumes of c's queue: es, the
// entries it consumes (nil for none). Just before the batch is applied it
// either writes c's queue-state key, with the head moved past es and the
// tail at the next sequence number to assign, or, when es extends the run
// of consumes that need not write it (see extendsRun), leaves the key as
// it is. A Tx that consumes nothing (es nil: Close) always writes it.
// Several calls in one Tx for one queue add up. es is the caller's until
// tx is applied or aborted: it must not change it meanwhile.
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
		if w.c.decide(w); !w.write {
			continue
		}
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
// control (or the runs the consumes extend), releases the lock and
// recycles ts: the Tx runs none of its hooks after this.
func (ts *txState) applied() {
	for i := range ts.writes {
		w := &ts.writes[i]
		w.c.stored(w)
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

// decide sets w.write, and w.st or w.front, for a batch that consumes
// w.consumed, under the state lock: the batch leaves the state key as it
// is when its consumes extend the run (extendsRun), and otherwise writes
// stateFor's value.
func (c *core) decide(w *stateWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if front, ok := c.extendsRun(w.consumed); ok {
		w.write, w.front = false, front
		return
	}
	w.write = true
	w.st, w.enq = c.stateFor(w.consumed)
}

// extendsRun reports whether a batch that consumes es may leave the
// queue-state key as it is, and returns the end of the run it makes. The
// stored value must be a run state (tag 0x03: its head was a live message
// when it was written, or at its count's end), and the batches applied
// since it must each have done the same, so that the messages consumed
// since it form one run [last.head, front): es must be the numbers
// [front, end) and end at most knobs.Queue.StateEvery past last.head.
// And end must hold a live message that no applied batch consumed, or
// lie at or past the stored count's end: then after a crash that keeps
// this batch and loses every later one, the first live message at or
// after the stored head is end (or past the count's end), so Open finds
// the run as [head, first live message), steps over at most StateEvery
// consumed numbers to get there, and takes from the count exactly the
// messages of the run below its end. Consumes out of order, or that skip
// a gap, write the key, as every consume did before.
func (c *core) extendsRun(es []*entry) (int64, bool) {
	if !c.last.run || len(es) == 0 {
		return 0, false
	}
	lo, hi := es[0].seq, es[0].seq
	for _, e := range es[1:] {
		lo, hi = min(lo, e.seq), max(hi, e.seq)
	}
	// Entries are distinct, so len(es) numbers in [lo, hi] are all of it.
	end := hi + 1
	if lo != c.front || end-lo != int64(len(es)) || end-c.last.head > int64(knobs.Queue.StateEvery) {
		return 0, false
	}
	return end, c.holds(end, c.last.countTo)
}

// holds reports whether seq is at or past countTo, or a live message that
// no batch applied so far consumed: a delivered message still in [head,
// cursor), or the message at the cursor, which is below the watermark
// (countTo is at most the watermark) and so committed, unless an aborted
// enqueue left it empty. The caller holds mu.
func (c *core) holds(seq, countTo int64) bool {
	switch {
	case seq >= countTo:
		return true
	case seq < c.cursor:
		e := c.entryAt(seq)
		return e != nil && !e.gone
	case seq == c.cursor:
		return seq >= c.abortedTo
	}
	return false
}

// stateFor is the queue-state value for a batch that consumes es, computed
// under the state lock. head is the oldest message the batch leaves
// unconsumed, counting the batches applied before it (whose commits may
// not have returned yet) as done and every other write in flight as not
// done, or the head last stored if that is later. A crash never keeps a
// later write while losing an earlier one, so if it keeps this value it
// keeps those batches too, and the stored head never moves back. tail is
// the next sequence number to assign, which only grows. The value is a
// run state if head holds (see holds), so that later consumes may extend
// a run from it.
//
// count is exact for the messages below countTo, the watermark: every
// enqueue below it has committed or aborted, so the messages committed
// since the last stored state are known, and the consumes applied before
// this batch are in the last stored count or in unstored. (A batch
// applied before this one but not yet returned does not matter: it
// counted itself.) It returns the count of enqueued messages the value
// includes.
func (c *core) stateFor(es []*entry) (state, int64) {
	h := c.headWithout(es)
	head := max(c.last.head, h)
	countTo := max(c.last.countTo, c.watermark)
	return state{
		head:    head,
		tail:    max(c.last.tail, c.next),
		counted: true,
		run:     head == h && c.holds(head, countTo),
		count:   max(c.last.count+(c.enqueued-c.lastEnqueued)-c.unstored-int64(len(es)), 0),
		countTo: countTo,
	}, c.enqueued
}

// stored records what an applied batch did: its consumes are gone from the
// store, and it wrote w.st (which counted w.enq enqueued messages) or
// extended the run to w.front.
func (c *core) stored(w *stateWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range w.consumed {
		e.gone = true
	}
	if w.write {
		c.last, c.lastEnqueued, c.unstored, c.front = w.st, w.enq, 0, w.st.head
		return
	}
	c.unstored += int64(len(w.consumed))
	c.front = w.front
}
