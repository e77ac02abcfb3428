package tipkv

import (
	"errors"
	"fmt"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/once"
)

// The errors tipkv returns, wrapped with the key, id or name that failed:
// test for them with errors.Is.
var (
	// ErrNotFound is returned when a document, version or message does not
	// exist.
	ErrNotFound = engine.ErrNotFound

	// ErrConflict is returned by conditional writes (PutIf) when the current
	// state is not the one the caller expected, and by DB.Update on a shared
	// engine when its conditions kept failing after every retry.
	ErrConflict = link.ErrConflict

	// ErrLeaseLost is returned by a write that depends on a lease another
	// holder took over since: a queue's Ack, Release, Retry or Extend of a
	// message delivered again (queue.ErrLeaseLost is this error), and a
	// consumer-group member's Advance or Renew after another member of the
	// group took the group over (versioned.Member). Nothing is written.
	// It matches ErrConflict.
	ErrLeaseLost = fmt.Errorf("%w: lease lost", ErrConflict)

	// ErrConditionFailed is what a commit-time condition that did not hold
	// returns on a shared engine: another process changed what the Update
	// read. DB.Update retries it; after its last try the error matches
	// ErrConflict too.
	ErrConditionFailed = engine.ErrConditionFailed

	// ErrUnknownOutcome is returned when a commit was sent to a shared
	// engine and no answer came back (a deadline, a broken connection): it
	// may or may not have been applied. It is never retried; read back, or
	// write with an idempotency key, to find out.
	ErrUnknownOutcome = engine.ErrUnknownOutcome

	// ErrClosed is returned by every call on a DB after Close has begun, and
	// by calls on handles of a closed DB.
	ErrClosed = engine.ErrClosed

	// ErrCorrupt is returned when stored bytes do not decode: a key tipkv did
	// not write, or a value that is not a valid encoding of the requested
	// type. The message names the key.
	ErrCorrupt = codec.ErrCorrupt

	// ErrInvalid is returned for bad input: an empty id or name, an id or
	// value over its limit, a version out of range, a bad query or cursor.
	// Nothing is written.
	ErrInvalid = engine.ErrInvalid

	// ErrFormat is returned by Open when the directory is not a tipkv store,
	// or holds a store of a newer format than this version reads; and by a
	// ReadOnly Open of a store whose upgrade was interrupted, or of a store
	// of an older format on a shared engine (another process could upgrade
	// it meanwhile): open it once for writing. Open changes nothing in
	// those cases.
	ErrFormat = engine.ErrFormat

	// ErrPruned is returned by a read by time (versioned's AsOfTime,
	// HistoryBetween) whose answer lay in versions that retention (Prune,
	// PruneBefore, KeepVersions) removed. The error is a *PrunedError that
	// carries the oldest time still answerable: test for it with
	// errors.Is(err, ErrPruned), read it with errors.As.
	ErrPruned = errors.New("tipkv: pruned")

	// ErrUntimed is returned by a read by time whose answer lies in
	// versions written before commit times existed (store format 3 and
	// older): their times are unknown, so the read cannot tell.
	ErrUntimed = errors.New("tipkv: written before commit times")

	// ErrLocked is returned by Open when the store is already open, in
	// another process or in this one: Pebble locks the directory. (A store
	// that failed on a fatal disk error keeps its lock until the process
	// exits.)
	ErrLocked = engine.ErrLocked

	// ErrIdempotencyMismatch is returned by a write guarded by an
	// idempotency key (EnqueueOnce, AppendOnce, PutOnce) whose key still
	// holds for a write of other content: the same key, another value.
	// Nothing is written.
	ErrIdempotencyMismatch = once.ErrMismatch
)

// PrunedError is the error of a read by time that retention answered:
// the versions that held the answer were dropped. It matches ErrPruned.
type PrunedError struct {
	// Where names what was read: a collection and document.
	Where string
	// Asked is the time the read asked for.
	Asked time.Time
	// Oldest is the oldest time still answerable: the commit time of the
	// oldest version kept, or, when whole documents were purged, the
	// collection's purge horizon (see versioned.Collection.AsOfTime).
	Oldest time.Time
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("%v: %s: the versions at %s were dropped; the oldest time still answerable is %s",
		ErrPruned, e.Where, e.Asked.UTC().Format(time.RFC3339Nano), e.Oldest.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrPruned) true.
func (e *PrunedError) Is(target error) bool { return target == ErrPruned }
