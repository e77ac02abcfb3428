// Package link is the bridge between the root package and the packages
// built on it (versioned, queue): it carries what they need of a
// *tipkv.DB without putting it in the public API.
//
// The root package cannot be imported from here (it imports link), so its
// types reach link the other way round: tipkv.DB, tipkv.Batch and
// tipkv.Snapshot each embed one of this package's handle types (Root,
// InBatch, InView) under an unexported name. Their methods are unexported,
// so they add nothing to the public API, yet they make those root types
// implement this package's Writer and Reader interfaces. A package then
// goes from a *tipkv.DB, a *tipkv.Batch or a *tipkv.Snapshot to the DB's
// internals with one typed call, Of, WriterOf or ReaderOf, and writes with
// Write: go-to-definition and call graphs follow every step.
package link

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/tipkv/tipkv/engine"
)

// DB is what tipkv's packages use of one *tipkv.DB.
//
// Its one invariant: the root package fills every field in OpenEngine,
// before the *tipkv.DB is returned to anyone, and never changes a field
// after that. Packages therefore read the fields without a lock, from any
// goroutine, for as long as they hold the DB (what the fields point to is
// safe for concurrent use: the store, the registry, the clock, the
// logger).
type DB struct {
	// Store is the engine under the DB.
	Store engine.Store
	// Caps are the Store's, read once.
	Caps engine.Caps
	// Name is where the DB was opened: its directory, or the name a
	// shared engine gave.
	Name string
	// Clock is Options.Clock (never nil).
	Clock func() time.Time
	// Logger is Options.Logger, or one that discards everything cheaply
	// (never nil): see the package's logging conventions in logger.go.
	Logger *slog.Logger
	// LegacyNames says the default value codec names struct fields as
	// format 1 did (Go names, json tags ignored).
	LegacyNames bool
	// Format is the store format whose rules values are read by:
	// tipkv.FormatVersion, or an older one for a DB opened ReadOnly on a
	// store that was not upgraded yet.
	Format int
	// ReadOnly refuses every write with ErrInvalid.
	ReadOnly bool
	// NoSync commits without waiting for durability (Options.NoSync).
	NoSync bool
	// MaxRetries is how often a write runs again after a failed condition
	// (Options.MaxRetries: negative never).
	MaxRetries int
	// Services holds the packages' per-DB state: version caches, queue
	// watermarks, background jobs, meters.
	Services Registry
}

// Writer is implemented by *tipkv.DB (a write commits alone) and by
// *tipkv.Batch (a write joins the batch's Update), through the handles
// they embed. tipkv.Writer is this interface.
type Writer interface {
	writeTarget() (*DB, *Tx, error)
}

// Reader is implemented by *tipkv.DB (reads see the live store) and by
// *tipkv.Snapshot (reads see its view), through the handles they embed.
type Reader interface {
	readTarget() (*DB, engine.Reader, error)
}

// Root is the handle a *tipkv.DB embeds.
type Root struct{ db *DB }

// NewRoot returns the handle of db.
func NewRoot(db *DB) Root { return Root{db: db} }

func (r *Root) writeTarget() (*DB, *Tx, error) { return r.db, nil, nil }
func (r *Root) readTarget() (*DB, engine.Reader, error) {
	return r.db, r.db.Store, nil
}

// InBatch is the handle a *tipkv.Batch embeds: the Tx of its Update, until
// EndBatch.
type InBatch struct {
	db *DB
	tx *Tx // nil once the Update returned: the Tx is recycled
}

// NewInBatch returns the handle of a Batch writing to tx.
func NewInBatch(db *DB, tx *Tx) InBatch { return InBatch{db: db, tx: tx} }

// EndBatch ends a Batch's use of its Tx: its Update returned, or its
// function did and the commit is next. Later writes on it fail.
func EndBatch(b *InBatch) { b.tx = nil }

func (b *InBatch) writeTarget() (*DB, *Tx, error) {
	if b.tx == nil {
		return nil, nil, fmt.Errorf("%w: batch used after its Update returned", engine.ErrInvalid)
	}
	return b.db, b.tx, nil
}

// WithMeta is a Writer that writes through another with metadata of its
// own (tipkv.WithMetadata): each write made through it carries meta.
type WithMeta struct {
	w    Writer
	meta []byte // encoded (docfmt.AppendMeta)
	err  error  // the metadata's, returned by every write
}

// NewWithMeta returns a Writer that writes through w with meta, or fails
// every write with err when it is not nil.
func NewWithMeta(w Writer, meta []byte, err error) *WithMeta {
	if inner, ok := w.(*WithMeta); ok && inner != nil {
		w = inner.w // the outer metadata replaces the inner
	}
	return &WithMeta{w: w, meta: meta, err: err}
}

func (m *WithMeta) writeTarget() (*DB, *Tx, error) {
	if m.err != nil {
		return nil, nil, m.err
	}
	return target(m.w)
}

// InView is the handle a *tipkv.Snapshot embeds: its view, until EndView.
type InView struct {
	db *DB
	r  engine.Reader // nil once the View returned
}

// NewInView returns the handle of a Snapshot reading r.
func NewInView(db *DB, r engine.Reader) InView { return InView{db: db, r: r} }

// EndView ends a Snapshot: its View returned. Later reads on it fail.
func EndView(v *InView) { v.r = nil }

func (v *InView) readTarget() (*DB, engine.Reader, error) {
	if v.r == nil {
		return nil, nil, fmt.Errorf("%w: snapshot used after its View returned", engine.ErrInvalid)
	}
	return v.db, v.r, nil
}

// errNil is the error for a nil *tipkv.DB, Batch or Snapshot.
func errNil(x any) error {
	return fmt.Errorf("%w: nil %T", engine.ErrInvalid, x)
}

// target resolves w. A nil *tipkv.DB or *tipkv.Batch makes the embedded
// handle's method panic on the field's address: that one panic is turned
// into ErrInvalid.
func target(w Writer) (db *DB, tx *Tx, err error) {
	if w == nil {
		return nil, nil, fmt.Errorf("%w: nil writer", engine.ErrInvalid)
	}
	defer func() {
		if recover() != nil {
			db, tx, err = nil, nil, errNil(w)
		}
	}()
	return w.writeTarget()
}

// Of returns the DB that w writes to: the *tipkv.DB itself, or the DB of
// a *tipkv.Batch whose Update is running. A nil w, or a Batch used after
// its Update returned, is ErrInvalid.
func Of(w Writer) (*DB, error) {
	db, _, err := target(w)
	return db, err
}

// TxOf returns the Tx of a *tipkv.Batch whose Update is running (nil for
// a *tipkv.DB). A nil w, or a Batch used after its Update returned, is
// ErrInvalid.
func TxOf(w Writer) (*Tx, error) {
	_, tx, err := target(w)
	return tx, err
}

// ReaderOf returns what r reads (the live store of a *tipkv.DB, the view
// of a *tipkv.Snapshot) and the DB it belongs to. A nil r, or a Snapshot
// whose View returned, is ErrInvalid.
func ReaderOf(r Reader) (db *DB, rd engine.Reader, err error) {
	if r == nil {
		return nil, nil, fmt.Errorf("%w: nil reader", engine.ErrInvalid)
	}
	defer func() {
		if recover() != nil {
			db, rd, err = nil, nil, errNil(r)
		}
	}()
	return r.readTarget()
}

// Write runs f with the Tx of w: a *tipkv.Batch passes its own Tx; a
// *tipkv.DB commits a new Tx alone after f returns, and runs f again in a
// new Tx after a failed condition, as DB.Update does.
//
// It is a function, not a method the root package provides, so that f
// does not escape: the closure a package passes stays on its stack.
func Write(w Writer, f func(*Tx) error) error { return write(w, f, false) }

// WriteOnce is Write, except that a *tipkv.DB commits f's Tx once and
// returns a failed condition (engine.ErrConditionFailed) instead of
// running f again after a pause: for a package that retries in its own
// way (a queue consumer that lost a race reads again at once).
func WriteOnce(w Writer, f func(*Tx) error) error { return write(w, f, true) }

func write(w Writer, f func(*Tx) error, once bool) error {
	db, tx, err := target(w)
	if err != nil {
		return err
	}
	if m, ok := w.(*WithMeta); ok {
		inner := f
		f = func(tx *Tx) error {
			prev := tx.writeMeta
			tx.writeMeta = m.meta
			defer func() { tx.writeMeta = prev }()
			return inner(tx)
		}
	}
	if tx != nil {
		return f(tx)
	}
	if db.ReadOnly {
		return errReadOnly
	}
	if once {
		return db.try(f, nil)
	}
	return db.run(f)
}

var errReadOnly = fmt.Errorf("%w: update: the DB is read-only", engine.ErrInvalid)

// Update is DB.Update's loop: it runs fn in a new Tx and commits it, and
// again after a failed condition (Retry). The root package calls it with
// a function that wraps the Tx in a *tipkv.Batch.
func (db *DB) Update(fn func(*Tx) error) error {
	if db.ReadOnly {
		return errReadOnly
	}
	return db.run(fn)
}

// run runs f in a new Tx and commits it, and again after a failed
// condition (Retry). On an engine that can lock (engine.Locker), a write
// whose commit failed a condition on a key runs again holding the key's
// lock (hot.go): the wait for the lock is its pause, and its batches tell
// the engine which locks they hold (engine.LockHolding), so that writers
// which have not collided yet give way to the holder.
func (db *DB) run(f func(*Tx) error) error {
	lk, _ := db.Store.(engine.Locker)
	var held lockSet
	defer held.release()
	for attempt := 0; ; attempt++ {
		var hold [][]byte
		if lk != nil {
			hold = held.prefixes
			if hold == nil {
				hold = [][]byte{}
			}
		}
		err := db.try(f, hold)
		if err == nil || !errors.Is(err, engine.ErrConditionFailed) {
			return err
		}
		if lk != nil {
			if ps := conflictPrefixes(err); len(ps) > 0 && !held.holdsAll(ps) {
				if gave := db.giveUp(attempt, err); gave != nil {
					return gave
				}
				if db.lock(lk, &held, ps) {
					continue
				}
				lk = nil // the engine cannot lock: write as without
			}
		}
		again, gave := db.Retry(attempt, err)
		if !again {
			return gave
		}
	}
}

// try runs f once in a new Tx and commits it, or aborts it if f fails or
// panics (the panic goes on). The Tx and the store's batch are recycled.
// A non-nil hold is told to a batch that implements engine.LockHolding:
// the prefixes whose locks the writer holds.
func (db *DB) try(f func(*Tx) error, hold [][]byte) (err error) {
	b := db.Store.NewBatch()
	if hold != nil {
		if lh, ok := b.(engine.LockHolding); ok {
			lh.Hold(hold)
		}
	}
	tx := NewTx(b, db)
	committed := false
	defer func() {
		if !committed {
			tx.Abort()
		}
		_ = tx.Batch.Close()
		tx.Release()
	}()
	if err = f(tx); err != nil {
		return err
	}
	committed = true
	return tx.Commit(!db.NoSync)
}

// Retry decides what follows attempt, whose commit failed a condition
// (err): it pauses and says to run again, or gives up with an error that
// matches tipkv.ErrConflict.
func (db *DB) Retry(attempt int, err error) (bool, error) {
	if gave := db.giveUp(attempt, err); gave != nil {
		return false, gave
	}
	time.Sleep(backoff(attempt))
	return true, nil
}

// giveUp returns the error that ends a write whose attempt failed a
// condition (err) when the retry budget is spent, or nil.
func (db *DB) giveUp(attempt int, err error) error {
	if db.MaxRetries >= 0 && attempt < db.MaxRetries {
		return nil
	}
	if on := conflictOn(err); on != "" {
		return fmt.Errorf("%w: %s: gave up after %d attempts: %w", ErrConflict, on, attempt+1, err)
	}
	return fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflict, attempt+1, err)
}

// ErrConflict is tipkv.ErrConflict (the root package re-exports it).
var ErrConflict = errors.New("tipkv: conflict")

// backoff is the pause before attempt+1: 1 ms doubling to 256 ms, with
// jitter, so that writers that collided spread out.
func backoff(attempt int) time.Duration {
	d := time.Millisecond << min(attempt, 8)
	return d/2 + rand.N(d)
}

// StoreOf is Of(w).Store: the engine under w's DB.
func StoreOf(w Writer) (engine.Store, error) {
	db, err := Of(w)
	if err != nil {
		return nil, err
	}
	return db.Store, nil
}
