package tipkv

import (
	"fmt"

	"github.com/tipkv/tipkv/engine"
)

// Snapshot is a consistent, read-only view of a DB as of the moment View
// began: reads through it see the same store whatever commits meanwhile.
// The packages' read handles take one (versioned: Collection.In, Feed.In;
// see their docs). A Snapshot is valid only inside the function passed to
// View; it is safe for concurrent use by the goroutines that function
// starts, until it returns.
type Snapshot struct {
	db   *DB
	snap engine.Snapshot
	done bool
}

// View runs fn with a snapshot of the store and releases it when fn
// returns, with fn's error. On Pebble a snapshot is a Pebble snapshot; on
// a shared engine, one revision (etcd) or one transaction (SQL).
func (db *DB) View(fn func(*Snapshot) error) error {
	if fn == nil {
		return fmt.Errorf("%w: view: nil function", ErrInvalid)
	}
	snap, err := db.store.NewSnapshot()
	if err != nil {
		return fmt.Errorf("tipkv: view: %w", err)
	}
	s := &Snapshot{db: db, snap: snap}
	defer func() {
		s.done = true
		_ = snap.Close()
	}()
	return fn(s)
}

// DB returns the DB the snapshot belongs to.
func (s *Snapshot) DB() *DB { return s.db }

func readerOf(r any) (engine.Reader, *DB, error) {
	switch r := r.(type) {
	case *DB:
		if r == nil {
			return nil, nil, fmt.Errorf("%w: nil *tipkv.DB", ErrInvalid)
		}
		return r.store, r, nil
	case *Snapshot:
		if r == nil {
			return nil, nil, fmt.Errorf("%w: nil *tipkv.Snapshot", ErrInvalid)
		}
		if r.done {
			return nil, nil, fmt.Errorf("%w: snapshot used after its View returned", ErrInvalid)
		}
		return r.snap, r.db, nil
	}
	return nil, nil, fmt.Errorf("%w: reader %T is neither *tipkv.DB nor *tipkv.Snapshot", ErrInvalid, r)
}
