package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
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
	// webServing, if set, is called once web serves, with its URL and a
	// function that stops it as an interrupt would.
	webServing func(url string, stop func())
	// tailing, if set, is called once tail follows, with a function that
	// stops it as an interrupt would; tailed after each event it shows.
	tailing func(stop func())
	tailed  func(position int64)
}{now: time.Now, tickEvery: 10 * time.Second}

// store is an open tipkv store and its raw key-value view.
type store struct {
	dir    string // the STORE argument: a directory, or a shared engine's
	db     *tipkv.DB
	kv     engine.Store
	fm     docfmt.Rules // how document versions read (the store's format)
	engine *Engine      // nil: a Pebble directory
}

// openStore opens the store target names, read-only unless write is set.
// On failure it reports why on stderr, in words for people, and returns
// the exit status.
func (c *ctx) openStore(target string, write bool) (*store, int) {
	s, err := c.openStoreErr(target, write)
	if err != nil {
		return nil, c.openFailed(target, err)
	}
	return s, exitOK
}

// openStoreErr opens the store target names (a Pebble directory, or the
// store of an engine of Options.Engines), read-only unless write is set.
// It never creates a store: tipkv.Open creates one in a missing or empty
// directory when it may write, so a write open first checks, read-only,
// that a store is there.
func (c *ctx) openStoreErr(target string, write bool) (*store, error) {
	var db *tipkv.DB
	var err error
	e := c.engineFor(target)
	switch {
	case e != nil:
		db, err = e.Open(context.Background(), target, &tipkv.Options{ReadOnly: !write, Clock: knobs.now})
	default:
		if write {
			if db, err = tipkv.Open(target, &tipkv.Options{ReadOnly: true, Clock: knobs.now}); err != nil {
				return nil, err
			}
			if err := db.Close(); err != nil {
				return nil, err
			}
		}
		db, err = tipkv.Open(target, &tipkv.Options{ReadOnly: !write, Clock: knobs.now})
	}
	if err != nil {
		return nil, err
	}
	ln, err := link.Of(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if e != nil {
		// Pebble's Open finds no store in an empty directory; an engine
		// opens whatever it is given, so the format key tells.
		_, err := ln.Store.Get(codec.AppendString(codec.AppendFamily(nil, codec.FamilyMeta), "format"))
		if errors.Is(err, engine.ErrNotFound) {
			err = fmt.Errorf("%w: %s holds no tipkv store", tipkv.ErrNotFound, db.Dir())
		}
		if err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return &store{dir: redact(target), db: db, kv: ln.Store, fm: docfmt.RulesOf(ln.Format), engine: e}, nil
}

// pebbleOnly refuses a command that works on a Pebble directory only
// (compact, backup) when target names a shared engine's store, before
// opening it: exitUsage, with a message that says why. It returns exitOK
// for a directory.
func (c *ctx) pebbleOnly(target string) int {
	e := c.engineFor(target)
	if e == nil {
		return exitOK
	}
	return c.usagef("%s works on a Pebble directory, and this is a store of %s, which does its own %s", c.cmd.name, e.Name, map[string]string{"compact": "compactions", "backup": "backups"}[c.cmd.name])
}

// openFailed reports why the store in dir did not open and returns
// exitUsage.
func (c *ctx) openFailed(dir string, err error) int {
	msg, kind := openError(redact(dir), err)
	return c.fail(exitUsage, kind, msg)
}

func (s *store) close() { _ = s.db.Close() }

// openError says why a store did not open, without Pebble's internals when
// the reason is a common one, and the kind of the failure.
func openError(dir string, err error) (msg, kind string) {
	switch {
	case isLocked(err):
		return fmt.Sprintf("%s: the store is in use by another process (Pebble opens a store in one process at a time); stop that process and try again, or read a copy: the service makes one while it runs with DB.Checkpoint, or mounts package console to show its store live", dir), kindInUse
	case errors.Is(err, tipkv.ErrNotFound):
		return fmt.Sprintf("%s: no tipkv store there (a directory missing or empty, or an engine's store never written); tipkv never creates one", dir), kindNoStore
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

// redact returns target with the password of a URL form (a PostgreSQL DSN
// such as postgres://user:secret@host/db) masked, for messages and output.
func redact(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.User == nil {
		return target
	}
	if _, ok := u.User.Password(); !ok {
		return target
	}
	return u.Redacted()
}
