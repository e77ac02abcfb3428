package tipkv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// Writer is where a write goes: a *DB commits it alone, at once; a *Batch
// joins it to the batch's atomic Update. Every mutator in tipkv's packages
// takes a Writer, so one function can write alone or inside a larger
// Update. Only *DB and *Batch implement Writer.
type Writer interface {
	writer()
}

func (*DB) writer()    {}
func (*Batch) writer() {}

// Batch collects writes of any family (document versions, feed events,
// queue messages) that commit together in one DB.Update: all or none of
// them survive a crash, and readers see all or none of them.
//
// A Batch is valid only inside the function passed to Update, and only for
// the goroutine running it; it is not safe for concurrent use.
type Batch struct {
	db   *DB
	tx   *link.Tx // nil once the Update returned: the Tx is recycled
	done bool
}

// Update runs fn with a new Batch and commits the batch atomically when fn
// returns nil. If fn returns an error or panics, nothing fn wrote is
// committed and Update returns fn's error (or re-panics).
//
// Writes are synced unless the DB was opened with NoSync. Readers never see
// a batch in part. Inside fn, pass the Batch, not the DB, to the packages'
// write calls: a write on the DB would commit on its own, outside the
// batch, and one that needs a document the Update holds fails with
// ErrInvalid rather than wait for the Update that is waiting for it.
//
// On Pebble, fn runs once. On a shared engine (etcd, SQL), the batch
// carries conditions on what fn read; if another process changed it before
// the commit, Update runs fn again with a new Batch, at most
// Options.MaxRetries more times with a growing pause, and then fails with
// an error that matches ErrConflict. Keep fn free of side effects other
// than its writes, or make them idempotent. A commit whose outcome is
// unknown (the connection broke after the request was sent) is never run
// again: its error matches ErrUnknownOutcome.
func (db *DB) Update(fn func(*Batch) error) error {
	if fn == nil {
		return fmt.Errorf("%w: update: nil function", ErrInvalid)
	}
	return db.commit(fn)
}

// commit runs the caller's Update function fn in a new Tx and commits it,
// again after a failed condition. (A package's write on the DB takes the
// same path through link.Write, begin and end.)
func (db *DB) commit(fn func(*Batch) error) error {
	if db.opts.ReadOnly {
		return fmt.Errorf("%w: update: the DB is read-only", ErrInvalid)
	}
	for attempt := 0; ; attempt++ {
		err := db.try(fn)
		if err == nil || !errors.Is(err, engine.ErrConditionFailed) {
			return err
		}
		if again, err := db.retry(attempt, err); !again {
			return err
		}
	}
}

// retry decides what follows attempt, whose commit failed a condition
// (err): it pauses and says to run again, or gives up with ErrConflict.
func (db *DB) retry(attempt int, err error) (bool, error) {
	if db.opts.MaxRetries < 0 || attempt >= db.opts.MaxRetries {
		return false, fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflict, attempt+1, err)
	}
	time.Sleep(backoff(attempt))
	return true, nil
}

// backoff is the pause before attempt+1: 1 ms doubling to 256 ms, with
// jitter, so that writers that collided spread out.
func backoff(attempt int) time.Duration {
	d := time.Millisecond << min(attempt, 8)
	return d/2 + rand.N(d)
}

// try runs fn (through runUpdateFn) once in a new Tx and commits it. The
// Tx and the store's batch are recycled: an Update allocates its Batch
// only.
func (db *DB) try(fn func(*Batch) error) (err error) {
	tx := link.NewTx(db.store.NewBatch(), db)
	b := &Batch{db: db, tx: tx}
	committed := false
	defer func() {
		b.done, b.tx = true, nil
		if !committed {
			tx.Abort()
		}
		_ = tx.Batch.Close()
		tx.Release()
	}()
	if err = db.runUpdateFn(fn, b); err != nil {
		return err
	}
	b.done = true
	committed = true
	return tx.Commit(!db.opts.NoSync)
}

// runUpdateFn calls the function of a DB.Update. It is a frame of its own,
// never inlined, so that a package that finds a document held by a running
// Update can tell from its own stack whether it runs inside such a
// function (a write on the DB inside an Update) and fail instead of
// waiting for ever.
//
//go:noinline
func (db *DB) runUpdateFn(fn func(*Batch) error, b *Batch) error {
	b.tx.SetRunning(true)
	defer b.tx.SetRunning(false)
	return fn(b)
}

// begin is link.Begin: the Tx a package's write on w runs in.
func begin(w any) (*link.Tx, bool, error) {
	switch w := w.(type) {
	case *Batch:
		if w == nil {
			return nil, false, fmt.Errorf("%w: nil *tipkv.Batch", ErrInvalid)
		}
		if w.done || w.tx == nil {
			return nil, false, fmt.Errorf("%w: batch used after its Update returned", ErrInvalid)
		}
		return w.tx, false, nil
	case *DB:
		if w == nil {
			return nil, false, fmt.Errorf("%w: nil *tipkv.DB", ErrInvalid)
		}
		if w.opts.ReadOnly {
			return nil, false, fmt.Errorf("%w: update: the DB is read-only", ErrInvalid)
		}
		return link.NewTx(w.store.NewBatch(), w), true, nil
	}
	return nil, false, fmt.Errorf("%w: writer %T is neither *tipkv.DB nor *tipkv.Batch", ErrInvalid, w)
}

// end is link.End: it ends a Tx that begin made for a *DB.
func end(w any, tx *link.Tx, err error, panicked bool, attempt int, once bool) (bool, error) {
	db := w.(*DB)
	committed := false
	func() {
		defer func() {
			if !committed {
				tx.Abort()
			}
			_ = tx.Batch.Close()
			tx.Release()
		}()
		if err != nil || panicked {
			return
		}
		committed = true
		err = tx.Commit(!db.opts.NoSync)
	}()
	if once || err == nil || !errors.Is(err, engine.ErrConditionFailed) {
		return false, err
	}
	return db.retry(attempt, err)
}
