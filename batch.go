package tipkv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tipkv/tipkv/internal/storage"
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
	tx   *storage.Tx // nil once the Update returned: the Tx is recycled
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
	return db.commit(fn, nil)
}

// commit runs the caller's Update function fn, or a package's single write
// f (one of them nil), in a new Tx and commits it, again after a failed
// condition.
func (db *DB) commit(fn func(*Batch) error, f func(*storage.Tx) error) error {
	if db.opts.ReadOnly {
		return fmt.Errorf("%w: update: the DB is read-only", ErrInvalid)
	}
	for attempt := 0; ; attempt++ {
		err := db.try(fn, f)
		if err == nil || !errors.Is(err, storage.ErrConditionFailed) {
			return err
		}
		if db.opts.MaxRetries < 0 || attempt >= db.opts.MaxRetries {
			return fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflict, attempt+1, err)
		}
		time.Sleep(backoff(attempt))
	}
}

// backoff is the pause before attempt+1: 1 ms doubling to 256 ms, with
// jitter, so that writers that collided spread out.
func backoff(attempt int) time.Duration {
	d := time.Millisecond << min(attempt, 8)
	return d/2 + rand.N(d)
}

// try runs fn (through runUpdateFn) or f once in a new Tx and commits it.
// The Tx and the store's batch are recycled: an Update allocates its Batch
// only, and a write on the DB nothing of its own.
func (db *DB) try(fn func(*Batch) error, f func(*storage.Tx) error) (err error) {
	tx := storage.NewTx(db.store.NewBatch(), db)
	var b *Batch
	committed := false
	defer func() {
		if b != nil {
			b.done, b.tx = true, nil
		}
		if !committed {
			tx.Abort()
		}
		_ = tx.Batch.Close()
		tx.Release()
	}()
	if fn != nil {
		b = &Batch{db: db, tx: tx}
		err = db.runUpdateFn(fn, b)
	} else {
		err = f(tx)
	}
	if err != nil {
		return err
	}
	if b != nil {
		b.done = true
	}
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

// writeOnce is write, except that a *DB commits f's Tx once: a failed
// condition comes back as it is (matching storage.ErrConditionFailed),
// for a caller with a retry policy of its own.
func writeOnce(w any, f func(*storage.Tx) error) error {
	if db, ok := w.(*DB); ok && db != nil {
		if db.opts.ReadOnly {
			return fmt.Errorf("%w: update: the DB is read-only", ErrInvalid)
		}
		return db.try(nil, f)
	}
	return write(w, f)
}

// write runs f with the Tx of w. A *DB gets a Tx of its own, committed when
// f returns nil (and run again after a failed condition).
func write(w any, f func(*storage.Tx) error) error {
	switch w := w.(type) {
	case *Batch:
		if w == nil {
			return fmt.Errorf("%w: nil *tipkv.Batch", ErrInvalid)
		}
		if w.done || w.tx == nil {
			return fmt.Errorf("%w: batch used after its Update returned", ErrInvalid)
		}
		return f(w.tx)
	case *DB:
		if w == nil {
			return fmt.Errorf("%w: nil *tipkv.DB", ErrInvalid)
		}
		return w.commit(nil, f)
	}
	return fmt.Errorf("%w: writer %T is neither *tipkv.DB nor *tipkv.Batch", ErrInvalid, w)
}
