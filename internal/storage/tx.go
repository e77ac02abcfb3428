package storage

import "sync/atomic"

// Tx is one write in progress: the batch it fills and the hooks that tipkv's
// packages hang on its outcome. The root package creates a Tx for every
// DB.Update and every write made directly on a DB, and runs the hooks; it is
// not safe for concurrent use.
type Tx struct {
	// Batch receives the writes.
	Batch Batch
	// Owner identifies the store the Tx writes to, so a package can refuse
	// a Tx of another store.
	Owner any

	prepare   []func() error
	applied   []func()
	committed []func()
	aborted   []func()
	state     map[any]any
	running   atomic.Bool
}

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
// with init on first use.
func (t *Tx) State(key any, init func() any) any {
	if v, ok := t.state[key]; ok {
		return v
	}
	if t.state == nil {
		t.state = make(map[any]any)
	}
	v := init()
	t.state[key] = v
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
	return nil
}

// Abort runs the OnAbort hooks. It is called instead of Commit when the
// batch is discarded.
func (t *Tx) Abort() { run(t.aborted) }

func run(hooks []func()) {
	for _, f := range hooks {
		f()
	}
}
