package tipkv

import (
	"fmt"

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
	tx   storage.Tx
	done bool
}

// Update runs fn with a new Batch and commits the batch atomically when fn
// returns nil. If fn returns an error or panics, nothing fn wrote is
// committed and Update returns fn's error (or re-panics).
//
// Writes are synced unless the DB was opened with NoSync. Readers never see
// a batch in part. Inside fn, pass the Batch, not the DB, to the packages'
// write calls: a write made on the DB inside fn commits on its own.
func (db *DB) Update(fn func(*Batch) error) (err error) {
	if db.opts.ReadOnly {
		return fmt.Errorf("%w: update: the DB is read-only", ErrInvalid)
	}
	b := &Batch{db: db}
	b.tx.Batch = db.store.NewBatch()
	b.tx.Owner = db
	defer b.tx.Batch.Close()
	committed := false
	defer func() {
		b.done = true
		if !committed {
			b.tx.Abort()
		}
	}()
	if err := fn(b); err != nil {
		return err
	}
	b.done = true
	committed = true
	return b.tx.Commit(!db.opts.NoSync)
}

// write runs f with the Tx of w. A *DB gets a Tx of its own, committed when
// f returns nil.
func write(w any, f func(*storage.Tx) error) error {
	switch w := w.(type) {
	case *Batch:
		if w == nil {
			return fmt.Errorf("%w: nil *tipkv.Batch", ErrInvalid)
		}
		if w.done {
			return fmt.Errorf("%w: batch used after its Update returned", ErrInvalid)
		}
		return f(&w.tx)
	case *DB:
		if w == nil {
			return fmt.Errorf("%w: nil *tipkv.DB", ErrInvalid)
		}
		return w.Update(func(b *Batch) error { return f(&b.tx) })
	}
	return fmt.Errorf("%w: writer %T is neither *tipkv.DB nor *tipkv.Batch", ErrInvalid, w)
}
