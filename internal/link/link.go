// Package link connects tipkv's sub-packages to the internals of the root
// package without putting those internals in the public API. The root
// package sets these functions in its init; versioned/ and queue/ call them.
package link

import (
	"fmt"
	"time"

	"github.com/tipkv/tipkv/internal/storage"
)

var (
	// Store returns the storage of a *tipkv.DB.
	Store func(db any) (storage.Store, error)
	// Begin returns the Tx a write on w runs in: a *tipkv.Batch's own
	// (own false), or a new one for a *tipkv.DB (own true), which End
	// ends. Write calls it; packages call Write.
	Begin func(w any) (tx *storage.Tx, own bool, err error)
	// End ends a Tx that Begin made for a *tipkv.DB, after the function
	// that filled it returned err: it commits the Tx if err is nil and
	// aborts it otherwise, then recycles it. panicked says the function
	// panicked (the Tx is aborted, the panic goes on). again says that a
	// condition failed and the function should run again in a new Tx
	// (never with once, never for attempt past the DB's MaxRetries); End
	// has then waited the pause.
	End func(w any, tx *storage.Tx, err error, panicked bool, attempt int, once bool) (again bool, _ error)
	// Services returns the per-DB registry where packages keep in-memory
	// state (version caches, queue watermarks) shared by every handle of
	// one DB.
	Services func(db any) (*Registry, error)
	// Clock returns the clock of a *tipkv.DB (Options.Clock).
	Clock func(db any) (func() time.Time, error)
	// LegacyNames reports whether the default value codec of a *tipkv.DB
	// names struct fields as format 1 did (Go names, json tags ignored).
	LegacyNames func(db any) bool
	// Format returns the store format whose rules a *tipkv.DB reads values
	// by: tipkv.FormatVersion, or an older one for a DB opened ReadOnly on
	// a store that was not upgraded yet.
	Format func(db any) int
	// Reader returns the storage reader of a *tipkv.DB (the live store) or
	// a *tipkv.Snapshot (its view), and the *tipkv.DB it belongs to.
	Reader func(r any) (storage.Reader, any, error)
	// NewDB returns a *tipkv.DB on an open store, for engines outside the
	// core module (etcdkv, sqlkv) and for tests. opts is a *tipkv.Options
	// or nil; its engine fields (InMemory, CacheSize, MemTableSize) are
	// ignored. The DB owns the store: its Close closes it.
	NewDB func(s storage.Store, name string, opts any) (any, error)
)

// Write runs f with the Tx of a tipkv.Writer: a *tipkv.DB commits a new Tx
// alone after f returns (and runs f again in a new Tx after a failed
// condition, as DB.Update does), a *tipkv.Batch passes its own Tx.
//
// It is a function, not a hook the root package sets, so that f does not
// escape: the closure a package passes stays on its stack.
func Write(w any, f func(*storage.Tx) error) error { return write(w, f, false) }

// WriteOnce is Write, except that a *tipkv.DB commits f's Tx once and
// returns a failed condition (storage.ErrConditionFailed) instead of
// running f again after a pause: for a package that retries in its own way
// (a queue consumer that lost a race reads again at once).
func WriteOnce(w any, f func(*storage.Tx) error) error { return write(w, f, true) }

func write(w any, f func(*storage.Tx) error, once bool) error {
	if Begin == nil {
		return fmt.Errorf("%w: writer %T is neither *tipkv.DB nor *tipkv.Batch", storage.ErrInvalid, w)
	}
	for attempt := 0; ; attempt++ {
		tx, own, err := Begin(w)
		if err != nil {
			return err
		}
		if !own {
			return f(tx)
		}
		again, err := runOwn(w, tx, f, attempt, once)
		if !again {
			return err
		}
	}
}

// runOwn runs f in tx, a Tx of its own, and ends it, aborting it if f
// panics.
func runOwn(w any, tx *storage.Tx, f func(*storage.Tx) error, attempt int, once bool) (again bool, err error) {
	returned := false
	defer func() {
		if !returned {
			_, _ = End(w, tx, nil, true, attempt, true)
		}
	}()
	err = f(tx)
	returned = true
	return End(w, tx, err, false, attempt, once)
}
