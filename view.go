package tipkv

import (
	"fmt"

	"github.com/tipkv/tipkv/internal/link"
)

// Snapshot is a consistent, read-only view of a DB as of the moment View
// began: reads through it see the same store whatever commits meanwhile.
// The packages' read handles take one (versioned: Collection.In, Feed.In;
// see their docs). A Snapshot is valid only inside the function passed to
// View; it is safe for concurrent use by the goroutines that function
// starts, until it returns.
type Snapshot struct {
	linkInView // its view, until the View returns (internal/link)
	db         *DB
}

type linkInView = link.InView

// View runs fn with a snapshot of the store and releases it when fn
// returns, with fn's error. On Pebble a snapshot is a Pebble snapshot; on
// a shared engine, one revision (etcd) or one transaction (SQL).
func (db *DB) View(fn func(*Snapshot) error) error {
	if fn == nil {
		return fmt.Errorf("%w: view: nil function", ErrInvalid)
	}
	snap, err := db.core.Store.NewSnapshot()
	if err != nil {
		return fmt.Errorf("tipkv: view: %w", err)
	}
	s := &Snapshot{linkInView: link.NewInView(&db.core, snap), db: db}
	defer func() {
		link.EndView(&s.linkInView)
		_ = snap.Close()
	}()
	return fn(s)
}

// DB returns the DB the snapshot belongs to.
func (s *Snapshot) DB() *DB { return s.db }
