package versioned

import (
	"errors"
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
)

// Shared engines (engine.Caps.Shared: etcd, SQL) are written by several
// processes, so what this package remembers of a document (its latest and
// oldest versions, in the writer's cache) is a hint there, not the truth:
// another process may have written since. The writes then work so:
//
//   - A write may act on a hint, and every decision it takes on a
//     document's state travels with the batch as conditions on that state
//     (a guard, added once per Tx and document): the document's latest
//     version is base (key(base) present and key(base+1) absent; for no
//     version at all, the document's range empty) and, for the drops, its
//     oldest is oldest (key(oldest) present, key(oldest-1) absent). Versions
//     are dense, so these few keys pin the whole state. A write that finds
//     nothing to do (a Delete of a deleted document, a Prune with nothing
//     to drop) is guarded too, so that an Update's writes all hold at its
//     commit.
//   - If another process wrote first, a guard fails at commit
//     (ErrConditionFailed), the Tx's hints are dropped, and DB.Update (or
//     the write on the DB) runs again, reading the store.
//   - An answer that is an error rather than a write (PutIf's ErrConflict)
//     cannot be checked at commit, so it is only given on a state read
//     from the store in this Tx. PutIf(expected) reads nothing when the
//     hint agrees with expected or there is none: it assumes the latest is
//     expected and guards that; if the commit fails, the rerun reads, and
//     answers ErrConflict if the store says so. A hint that disagrees
//     (a likely conflict) is read at once.
//   - Drops are one range delete: on a remote engine a range is one
//     operation whatever it spans, and it never piles up in a memtable.
//
// The writer's per-document lock still serialises this process's writes of
// a document, so that they do not fail each other's guards.

// sharedView is what a Tx knows of a document on a shared engine, beside
// its docState view. The zero value is a view taken from a hint.
type sharedView struct {
	// base is the latest version the guard requires (when guarded).
	base int64
	// fresh: latest and deleted were read from the store in this Tx (and
	// moved on by the Tx's own writes since).
	fresh bool
	// guarded: the batch requires the store's latest version to be base.
	guarded bool
	// oldGuarded: the batch requires the store's oldest version to be the
	// one the view started from (or the view's oldest follows from the
	// latest guard).
	oldGuarded bool
	// verify is set in the committed state of a document that a failed
	// commit held: its hints are gone, and a PutIf must read before it
	// answers.
	verify bool
}

// readLatest reads the document's latest version from the store into the
// view, with its stored value.
func (d *docState) readLatest(s engine.Reader, prefix []byte) error {
	nv, err := newestVersion(s, prefix, true)
	if err != nil {
		return err
	}
	d.setLatest(nv)
	d.sh.fresh = true
	return nil
}

// maxKeptValue is the largest latest value a document's hint keeps after
// its Tx, on a shared engine: a larger one is read again by the next write
// that needs its commit time.
const maxKeptValue = 1 << 10

// knowLatestValue makes the view know the stored value of its latest
// version, so its commit time, exactly, before a write that follows it
// (version numbers alone do not pin it: a purge restarts them, so another
// process may have written other versions under the same numbers). It
// reads the value when the view has none, and the guard then requires the
// store to hold that value (see guard): a Get of the version the view
// names, whose absence means the view is stale.
func (d *docState) knowLatestValue(s engine.Reader, b engine.Batch, prefix []byte) error {
	if d.latest == 0 || d.lval != nil {
		return nil
	}
	key := numberKey(prefix, d.latest)
	raw, err := s.Get(key)
	if errors.Is(err, engine.ErrNotFound) {
		return errStale
	}
	if err != nil {
		return err
	}
	ver := docfmt.Rules{}.Parse(raw)
	d.lval, d.ltime, d.deleted, d.expires = raw, ver.Time, ver.Deleted, ver.Expires
	if d.sh.guarded {
		// Guarded on the version alone before: pin the value too. No
		// write of the Tx follows the guard's base yet, or lval would
		// be set.
		return b.Require(engine.Equals(key, raw))
	}
	return nil
}

// latestShared is latestOf on a shared engine: a hint, or a read when
// there is none, marked fresh.
func (d *docState) latestShared(s engine.Reader, prefix []byte) (int64, error) {
	if !d.latestKnown {
		if err := d.readLatest(s, prefix); err != nil {
			return 0, err
		}
	}
	return d.latest, nil
}

// guard requires, once per Tx, that the store's latest version of the
// document is the view's latest as it is now (before the Tx's own writes
// of it).
func (d *docState) guard(b engine.Batch, prefix []byte) error {
	if d.sh.guarded {
		return nil
	}
	d.sh.guarded, d.sh.base = true, d.latest
	if d.latest == 0 {
		// No version: the document's whole range is empty. On etcd a
		// failing Empty reads the range, so it is only used here, where
		// the range is expected to be empty. The batch copies the
		// condition's bytes (engine.Batch), so a Put's recycled prefix
		// buffer may go straight in.
		return b.Require(engine.Empty(prefix, numberKey(prefix, 0)))
	}
	present := engine.Present(numberKey(prefix, d.latest))
	if d.lval != nil {
		present = engine.Equals(numberKey(prefix, d.latest), d.lval) // its commit time too
	}
	if err := b.Require(present); err != nil {
		return err
	}
	return b.Require(engine.Absent(numberKey(prefix, d.latest+1)))
}

// guardOldest requires, once per Tx, that the store's oldest version of the
// document is the view's oldest, read or hinted before the Tx's own drops.
func (d *docState) guardOldest(b engine.Batch, prefix []byte) error {
	if d.sh.oldGuarded {
		return nil
	}
	d.sh.oldGuarded = true
	if d.oldest == 0 {
		return nil // no version: the latest guard's Empty covers it
	}
	if !d.sh.guarded || d.sh.base != d.oldest {
		if err := b.Require(engine.Present(numberKey(prefix, d.oldest))); err != nil {
			return err
		}
	}
	if d.oldest > 1 {
		return b.Require(engine.Absent(numberKey(prefix, d.oldest-1)))
	}
	return nil
}

// errStale is wrapped, with ErrConditionFailed, by the error of a write
// that found its Tx built on a hint the store contradicts: the commit
// would fail, so the Tx fails now and DB.Update runs it again. It matches
// ErrConflict too, for a caller that only knows that one.
var errStale = fmt.Errorf("%w: %w: another process wrote the document since this Update began; it runs again", tipkv.ErrConflict, engine.ErrConditionFailed)

// putIfLatest returns the latest version after which PutIf(expected)
// writes, on a shared engine, or conflict when the document's latest is
// not expected. It reads nothing when the hint agrees with expected or
// there is none: it assumes expected and guards that. It reads when a
// conflict is likely (the hint disagrees) or the answer may be one and the
// Tx's view was not read in this Tx, and after a failed commit.
func (d *docState) putIfLatest(s engine.Reader, prefix []byte, expected int64, clock func() time.Time) (latest int64, conflict bool, err error) {
	matches := func() bool { return d.latest == expected || (expected == 0 && d.gone(clock)) }
	switch {
	case d.sh.guarded || d.sh.fresh:
		// The Tx's own view: a read, or a guarded hint moved on by its own
		// writes.
		if matches() {
			return d.latest, false, nil
		}
		if d.sh.fresh {
			return 0, true, nil
		}
		// A guarded hint: a conflict is only true if the hint was.
		nv, err := newestVersion(s, prefix, false)
		if err != nil {
			return 0, false, err
		}
		if nv.v != d.sh.base {
			return 0, false, errStale
		}
		d.sh.fresh = true
		return 0, true, nil
	case d.sh.verify || (d.latestKnown && !matches()):
		// After a failed commit, or a hint that says conflict: read.
		if err := d.readLatest(s, prefix); err != nil {
			return 0, false, err
		}
		if !matches() {
			return 0, true, nil
		}
	case !d.latestKnown:
		// No read: assume it, and guard the assumption (expected 0: no
		// version at all; the guard's Empty fails on a deleted document,
		// and the rerun reads).
		d.latest, d.deleted, d.expires, d.ltime, d.lval, d.latestKnown = expected, false, 0, 0, nil, true
	}
	return d.latest, false, nil
}

// drop forgets what is known of a document after a commit that held it
// failed: the next Tx reads the store.
func (e *docEntry) drop() {
	e.state = docState{sh: sharedView{verify: true}}
}
