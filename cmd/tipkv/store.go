package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/link"
)

// knobs are what tests turn. They are read, never written, outside tests.
var knobs = struct {
	// now is the clock of every command: the DB's clock (tipkv.Options.
	// Clock: a document's expiry, a message's visibility), --since's
	// "now", and which messages queue counts as delayed. Durations that
	// compact reports are measured with the time package.
	now func() time.Time
	// tickEvery is how often a long compaction step says it is still at
	// work.
	tickEvery time.Duration
}{now: time.Now, tickEvery: 10 * time.Second}

// store is an open tipkv store and its raw key-value view.
type store struct {
	dir string
	db  *tipkv.DB
	kv  engine.Store
	fm  docfmt.Rules // how document versions read (the store's format)
}

// openStore opens the store in dir, read-only unless write is set. On
// failure it reports why on stderr, in words for people, and returns the
// exit status.
func (c *ctx) openStore(dir string, write bool) (*store, int) {
	s, err := openStore(dir, write)
	if err != nil {
		return nil, c.openFailed(dir, err)
	}
	return s, exitOK
}

// openStore opens the store in dir, read-only unless write is set. It
// never creates a store: tipkv.Open creates one in a missing or empty
// directory when it may write, so a write open first checks, read-only,
// that a store is there.
func openStore(dir string, write bool) (*store, error) {
	if write {
		db, err := tipkv.Open(dir, &tipkv.Options{ReadOnly: true, Clock: knobs.now})
		if err != nil {
			return nil, err
		}
		if err := db.Close(); err != nil {
			return nil, err
		}
	}
	db, err := tipkv.Open(dir, &tipkv.Options{ReadOnly: !write, Clock: knobs.now})
	if err != nil {
		return nil, err
	}
	ln, err := link.Of(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &store{dir: dir, db: db, kv: ln.Store, fm: docfmt.RulesOf(ln.Format)}, nil
}

// openFailed reports why the store in dir did not open and returns
// exitUsage.
func (c *ctx) openFailed(dir string, err error) int {
	msg, kind := openError(dir, err)
	return c.fail(exitUsage, kind, msg)
}

func (s *store) close() { _ = s.db.Close() }

// openError says why a store did not open, without Pebble's internals when
// the reason is a common one, and the kind of the failure.
func openError(dir string, err error) (msg, kind string) {
	switch {
	case isLocked(err):
		return fmt.Sprintf("%s: the store is in use by another process (a store is open in one process at a time); stop that process and try again", dir), kindInUse
	case errors.Is(err, tipkv.ErrNotFound):
		return fmt.Sprintf("%s: no tipkv store there (the directory is missing or empty); tipkv never creates one", dir), kindNoStore
	case errors.Is(err, tipkv.ErrFormat):
		return err.Error(), kindFormat
	case errors.Is(err, tipkv.ErrCorrupt):
		return err.Error(), kindCorrupt
	}
	return err.Error(), kindOpen
}

// isLocked reports whether Open failed because another process (or this
// one) holds the store's directory lock.
func isLocked(err error) bool { return errors.Is(err, tipkv.ErrLocked) }

// scan calls fn with every key and value in [lo, hi), in key order. The
// slices are only valid during the call. fn may stop the scan by returning
// errStop. The iterator is closed however the scan ends, a panic included,
// so that closing the store never waits for it.
func (s *store) scan(lo, hi []byte, fn func(k, v []byte) error) (err error) {
	it, err := s.kv.NewIter(lo, hi)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return fmt.Errorf("read value of key %x: %w", it.Key(), err)
		}
		if err := fn(it.Key(), v); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
	}
	return it.Error()
}

// errStop ends a scan early without an error.
var errStop = errors.New("stop")
