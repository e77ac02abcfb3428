package tipkv

import (
	"fmt"

	"github.com/tipkv/tipkv/internal/link"
)

// Writer is where a write goes: a *DB commits it alone, at once; a *Batch
// joins it to the batch's Update. Every mutator in tipkv's packages takes
// a Writer, so one function can write alone or inside a larger Update.
// Only *DB and *Batch implement Writer, and the Writer WithMetadata wraps
// around either.
type Writer interface {
	linkWriter
}

// linkWriter is link.Writer under a name of this package: its method is
// unexported, so no type outside tipkv implements Writer.
type linkWriter = link.Writer

// Batch collects writes of any family (document versions, feed events,
// queue messages) that commit together in one DB.Update: all or none of
// them survive a crash, and readers see all or none of them.
//
// A Batch is valid only inside the function passed to Update, and only for
// the goroutine running it; it is not safe for concurrent use.
type Batch struct {
	linkInBatch // its Tx, until the Update returns (internal/link)
}

type linkInBatch = link.InBatch

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
// again after a failed condition (link's DB.Update).
func (db *DB) commit(fn func(*Batch) error) error {
	return db.core.Update(func(tx *link.Tx) error {
		b := &Batch{link.NewInBatch(&db.core, tx)}
		defer link.EndBatch(&b.linkInBatch) // before the commit: a write after fn returned fails
		return db.runUpdateFn(fn, b, tx)
	})
}

// runUpdateFn calls the function of a DB.Update. It is a frame of its own,
// never inlined, so that a package that finds a document held by a running
// Update can tell from its own stack whether it runs inside such a
// function (a write on the DB inside an Update) and fail instead of
// waiting for ever.
//
//go:noinline
func (db *DB) runUpdateFn(fn func(*Batch) error, b *Batch, tx *link.Tx) error {
	tx.SetRunning(true)
	defer tx.SetRunning(false)
	return fn(b)
}
