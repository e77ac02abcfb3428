package link

import (
	"sync"
	"sync/atomic"

	"github.com/tipkv/tipkv/engine"
)

// Tx is one write in progress: the batch it fills and the hooks that tipkv's
// packages hang on its outcome. DB.Update (through link's DB.Update) and
// Write create a Tx for every Update and every write made directly on a
// DB, and run the hooks; it is not safe for concurrent use.
//
// They recycle a Tx (NewTx, Release) once its Update returns, with its
// hook lists and its state list emptied but their room kept, so that a
// commit allocates nothing for them. A package must therefore not
// use a Tx, nor keep a pointer to it, after its OnCommit or OnAbort hooks
// ran (or after its OnApplied hooks, for a package that registers only
// those): drop it there, as the state kept under State goes with the Tx.
type Tx struct {
	// Batch receives the writes.
	Batch engine.Batch
	// DB is the DB the Tx writes to, so a package can refuse a Tx of
	// another DB.
	DB *DB

	prepare   []func() error
	applied   []func()
	committed []func()
	aborted   []func()
	state     []stateEntry
	stateMap  map[any]any // the state, once it has more than maxStateList keys
	running   atomic.Bool
	now       int64 // the clock reading of Now, Unix ns; 0 until then
	// The encoded metadata (docfmt.AppendMeta) of the Update (SetMeta)
	// and of the write running now (a WithMeta writer); nil for none.
	batchMeta, writeMeta []byte
	// ended is set once the OnCommit or OnAbort hooks have all run: nothing
	// of the Tx's outcome is pending, so Release may recycle it.
	ended bool
}

type stateEntry struct{ key, val any }

// maxStateList is the most keys State looks up in a list before it moves
// them to a map (an Update on many queues of a shared engine has a key per
// queue).
const maxStateList = 8

// maxKept is the most hooks (or state keys) of one kind a recycled Tx keeps
// room for.
const maxKept = 64

var txPool = sync.Pool{New: func() any { return new(Tx) }}

// NewTx returns an empty Tx on b, writing to db: a recycled one if there
// is one.
func NewTx(b engine.Batch, db *DB) *Tx {
	t := txPool.Get().(*Tx)
	t.Batch, t.DB = b, db
	return t
}

// Release ends the caller's use of t, after its batch was closed, and
// recycles it if its outcome was settled: its OnCommit or OnAbort hooks
// all ran. A Tx whose durability wait failed, or whose hooks panicked, is
// left to the garbage collector as it is, since hooks that did not run
// may have left state pointing to it.
func (t *Tx) Release() {
	if !t.ended {
		return
	}
	t.Batch, t.DB, t.ended, t.now = nil, nil, false, 0
	t.batchMeta, t.writeMeta = nil, nil
	t.running.Store(false)
	t.prepare = reuse(t.prepare)
	t.applied = reuse(t.applied)
	t.committed = reuse(t.committed)
	t.aborted = reuse(t.aborted)
	t.state = reuse(t.state)
	t.stateMap = nil
	txPool.Put(t)
}

// reuse empties s, keeping its room unless it grew large.
func reuse[E any](s []E) []E {
	if cap(s) > maxKept {
		return nil
	}
	clear(s)
	return s[:0]
}

// Now returns the Tx's commit time, Unix nanoseconds (at least 1): the
// DB's clock read at the Tx's first call, so that every version, event
// and message one Update writes carries the same base time. A write whose
// record must be newer than its predecessor's takes the greater of this
// and the predecessor's time plus 1 ns. An Update that runs again (a
// failed condition on a shared engine) gets a new Tx, so a new reading.
func (t *Tx) Now() int64 {
	if t.now == 0 {
		t.now = max(t.DB.Clock().UnixNano(), 1)
	}
	return t.now
}

// Meta returns the encoded metadata of the write running on t: its own
// (tipkv.WithMetadata) or else the Update's (Batch.SetMetadata); nil for
// none. Packages store it with every version, event or message the write
// makes.
func (t *Tx) Meta() []byte {
	if t.writeMeta != nil {
		return t.writeMeta
	}
	return t.batchMeta
}

// SetMeta sets the Update's metadata (Batch.SetMetadata).
func (t *Tx) SetMeta(meta []byte) { t.batchMeta = meta }

// SetRunning marks whether the caller's Update function is running on this
// Tx (set by the root package only).
func (t *Tx) SetRunning(on bool) { t.running.Store(on) }

// Running reports whether the Tx belongs to a DB.Update whose function is
// still running: code of the caller's that may be blocked on something
// this process holds. It is safe to call from any goroutine.
func (t *Tx) Running() bool { return t.running.Load() }

// OnPrepare registers f to run after the writes are all in the batch and
// just before it is applied: f may add writes that must be computed as
// late as possible (a value that depends on what committed meanwhile). If
// f fails, the Tx aborts with f's error. Hooks run in registration order.
func (t *Tx) OnPrepare(f func() error) { t.prepare = append(t.prepare, f) }

// OnApplied registers f to run once the batch is visible to readers, before
// the durability wait. Hooks run in registration order.
func (t *Tx) OnApplied(f func()) { t.applied = append(t.applied, f) }

// OnCommit registers f to run once the batch is visible and durable (as
// durable as the write asked for).
func (t *Tx) OnCommit(f func()) { t.committed = append(t.committed, f) }

// OnAbort registers f to run when the batch will not be applied: the Update
// function failed, or Apply failed.
func (t *Tx) OnAbort(f func()) { t.aborted = append(t.aborted, f) }

// State returns the value a package keeps in this Tx under key, creating it
// with init on first use. key must be comparable.
func (t *Tx) State(key any, init func() any) any {
	if t.stateMap != nil {
		if v, ok := t.stateMap[key]; ok {
			return v
		}
		v := init()
		t.stateMap[key] = v
		return v
	}
	for i := range t.state {
		if t.state[i].key == key {
			return t.state[i].val
		}
	}
	v := init()
	if len(t.state) == maxStateList {
		t.stateMap = make(map[any]any, 2*maxStateList)
		for _, e := range t.state {
			t.stateMap[e.key] = e.val
		}
		t.stateMap[key] = v
		return v
	}
	t.state = append(t.state, stateEntry{key, v})
	return v
}

// Commit runs the OnPrepare hooks, applies the batch and runs the other
// hooks: OnApplied hooks after Apply,
// OnCommit hooks after Wait, OnAbort hooks if Apply fails.
//
// If Wait fails (the WAL sync failed: Pebble then refuses further writes)
// the writes are visible but their durability is unknown, and neither
// OnCommit nor OnAbort hooks run. That is the safe side: a queue's
// visibility watermark stays below the write, so no consumer acts on a
// message a crash could still erase; a restart settles what survived.
func (t *Tx) Commit(sync bool) (err error) {
	applied := false
	defer func() {
		// A panic before the batch was applied (in a prepare hook, or in
		// the engine) must not leave a hook's state behind: a lock taken by
		// a prepare hook would otherwise be held for ever.
		if r := recover(); r != nil {
			if !applied {
				t.Abort()
			}
			panic(r)
		}
	}()
	for _, f := range t.prepare {
		if err := f(); err != nil {
			t.Abort()
			return err
		}
	}
	if err := t.Batch.Apply(sync); err != nil {
		t.Abort()
		return err
	}
	applied = true
	run(t.applied)
	if err := t.Batch.Wait(); err != nil {
		return err
	}
	run(t.committed)
	t.ended = true
	return nil
}

// Abort runs the OnAbort hooks. It is called instead of Commit when the
// batch is discarded.
func (t *Tx) Abort() {
	run(t.aborted)
	t.ended = true
}

func run(hooks []func()) {
	for _, f := range hooks {
		f()
	}
}
