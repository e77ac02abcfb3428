// Package engine is the contract between tipkv's packages and the ordered
// key-value engine under them. versioned/ and queue/ speak only to these
// interfaces; tipkv implements them on Pebble in process, and engines
// shared by several processes (etcd in module etcdkv, a SQL table in
// module sqlkv) implement them over the network. Anyone may add an engine
// in a module of their own: give its Store to tipkv.OpenEngine.
//
// # Stability
//
// The contract is unstable before tipkv v1: a minor release may change it
// (CHANGELOG.md says how). An implementation must pass both suites: the
// store-level one in package enginetest and the DB-level one in package
// github.com/tipkv/tipkv/tipkvtest, both run from the engine's own tests.
//
// Keys and their order are codec's: bytewise, with codec.Split marking the
// prefix of numbered keys.
//
// # Exclusive and shared engines
//
// An engine is exclusive when one process holds it (Pebble's directory lock):
// the packages above then keep versions, sequence numbers, leases and
// watermarks in memory, trust them without a read, and never send a
// condition. An engine is Shared ([Caps]) when several processes write the
// same keys: the store is then the truth and memory a hint. Every read a
// write depends on travels with the write as a condition ([Batch.Require]),
// checked by the engine atomically with the writes.
//
// # Errors
//
// A failed condition is [ErrConditionFailed]: nothing was written, and the
// caller may read again and retry. An error after which the engine cannot
// say whether the batch was applied (the connection broke after the request
// was sent) matches [ErrUnknownOutcome]: it must never be retried blindly.
// A batch over the engine's limits fails before anything is sent with an
// error matching [ErrInvalid]. Corrupt stored data matches codec.ErrCorrupt.
package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tipkv/tipkv/codec"
)

// The errors of the contract. The root package re-exports them.
var (
	// ErrNotFound is returned by Get for a missing key.
	ErrNotFound = errors.New("tipkv: not found")

	// ErrClosed is returned by every call on a closed Store, Iter or Batch.
	ErrClosed = errors.New("tipkv: closed")

	// ErrInvalid is bad input, including a batch over the engine's limits.
	// Nothing is written.
	ErrInvalid = codec.ErrInvalid

	// ErrConditionFailed is returned by Apply when a condition given to
	// Require did not hold at commit time. Nothing was written.
	ErrConditionFailed = errors.New("tipkv: condition failed")

	// ErrFormat is returned when a store is not a tipkv store, or holds a
	// store of a newer format. Nothing is changed.
	ErrFormat = errors.New("tipkv: unsupported store")

	// ErrLocked is returned when an exclusive store is already open, in
	// another process or this one.
	ErrLocked = errors.New("tipkv: store is locked")

	// ErrUnknownOutcome is returned by Apply when the batch may or may not
	// have been applied: the request was sent and no answer came back.
	// Retrying could apply it twice; read back to find out.
	ErrUnknownOutcome = errors.New("tipkv: commit outcome unknown")
)

// ConditionError is a failed condition that names the keys it was on (a
// RangeEmpty's low bound), for an engine that knows them. It matches
// ErrConditionFailed. A caller that retries may take the keys' locks first
// (Locker).
type ConditionError struct {
	// Keys are the keys of the conditions that may have failed: one, or
	// several checked in one statement.
	Keys [][]byte
	// Msg says what failed, for the error's text.
	Msg string
}

func (e *ConditionError) Error() string { return ErrConditionFailed.Error() + ": " + e.Msg }

// Unwrap returns ErrConditionFailed.
func (e *ConditionError) Unwrap() error { return ErrConditionFailed }

// Reader reads a consistent or live view of the keys. Store and Snapshot
// implement it.
type Reader interface {
	// Get returns a copy of the value stored at key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// NewIter returns an iterator over the keys in [lo, hi). Both bounds are
	// required: no read in tipkv is unbounded, and on remote engines the
	// upper bound is what keeps a limited range read from walking far. lo
	// must not be empty. An iterator reads one consistent view of the store
	// (a Pebble iterator, one etcd revision, one SQL snapshot), taken no
	// later than its first positioning call.
	NewIter(lo, hi []byte) (Iter, error)
}

// Sizer is implemented by readers that read better when told how many keys
// a read expects (a remote engine fetches that many in its first request).
// It is a hint only: the iterator reads past n when asked.
type Sizer interface {
	NewIterN(lo, hi []byte, n int) (Iter, error)
}

// NewIterN opens an iterator on r over [lo, hi), telling the engine that n
// keys are expected (n <= 0: unknown) if it wants to know.
func NewIterN(r Reader, lo, hi []byte, n int) (Iter, error) {
	if s, ok := r.(Sizer); ok && n > 0 {
		return s.NewIterN(lo, hi, n)
	}
	return r.NewIter(lo, hi)
}

// Appender is implemented by readers that can append a value to the
// caller's buffer, sparing the copy Get allocates.
type Appender interface {
	// GetAppend appends the value stored at key to dst and returns the
	// extended buffer, or ErrNotFound (dst unchanged).
	GetAppend(dst, key []byte) ([]byte, error)
}

// GetAppend appends the value stored at key in r to dst, with r's
// GetAppend when it has one.
func GetAppend(r Reader, dst, key []byte) ([]byte, error) {
	if a, ok := r.(Appender); ok {
		return a.GetAppend(dst, key)
	}
	v, err := r.Get(key)
	if err != nil {
		return dst, err
	}
	return append(dst, v...), nil
}

// Store is an ordered key-value store. It is safe for concurrent use.
type Store interface {
	Reader
	// NewBatch returns an empty write batch.
	NewBatch() Batch
	// NewSnapshot returns a consistent view of the store as of now, for
	// several reads that must agree. Close it when done.
	NewSnapshot() (Snapshot, error)
	// Caps describes the engine.
	Caps() Caps
	// Close closes the store: calls in flight finish or fail with
	// ErrClosed (a commit that Close cuts off after it was sent fails with
	// an error matching ErrUnknownOutcome too), open iterators and
	// snapshots are closed (their later calls report ErrClosed), watches
	// end, and later calls return ErrClosed. A second Close returns
	// ErrClosed.
	Close() error
}

// Caps declares what an engine is and what it allows.
type Caps struct {
	// Shared is set when several processes may write the same keys. The
	// packages above then keep no authority in memory and send conditions
	// with every write that depends on a read.
	Shared bool

	// Watch is set when the Store implements Watcher: it can push changes.
	// Without it, waits poll every PollInterval.
	Watch bool

	// PollInterval is how often a wait polls the store when Watch is not
	// set. Zero means a second.
	PollInterval time.Duration

	// MaxBatchOps is the most writes (Set, Delete, DeleteRange) one batch
	// may hold, and separately the most conditions, counted as the engine
	// sends them: on etcd a Set inside a range deleted earlier in the same
	// batch splits the range and counts twice, so a package that fills
	// batches near the limit leaves headroom. Zero: no limit.
	MaxBatchOps int

	// MaxBatchBytes is the most bytes of keys, values and conditions one
	// batch may hold. Zero: no limit.
	MaxBatchBytes int

	// MaxValueSize is the largest value the engine stores. Zero: no limit
	// beyond MaxBatchBytes.
	MaxValueSize int

	// ClockSkew is the margin a shared engine's users allow between their
	// clocks when they compare times stored by another process (a lease's
	// deadline): a lease is taken over only ClockSkew after it ended.
	ClockSkew time.Duration
}

// Snapshot is a consistent read-only view. It is safe for concurrent use;
// its iterators are not.
type Snapshot interface {
	Reader
	// Close releases the view.
	Close() error
}

// Iter is a bounded forward iterator over one consistent view. It is not
// safe for concurrent use. Key and Value are valid until the next
// positioning call.
type Iter interface {
	// SeekGE moves to the first key >= key.
	SeekGE(key []byte) bool
	// SeekPrefixGE moves to the first key >= key that has key's prefix
	// (codec.Split); later Next calls stay within that prefix. Pebble
	// consults its bloom filters.
	SeekPrefixGE(key []byte) bool
	// First moves to the first key of the range.
	First() bool
	// Last moves to the last key of the range. Newest-first reads never use
	// it; it finds where an oldest-first range ends (a range delete's end,
	// a queue's last dead letter). Give it the tightest range known: a
	// remote engine may read the whole range to answer.
	Last() bool
	// Next moves to the next key.
	Next() bool
	// NextPrefix moves to the first key with a greater prefix
	// (codec.Split).
	NextPrefix() bool
	// Valid reports whether the iterator is at a key.
	Valid() bool
	// Key returns the current key.
	Key() []byte
	// Value returns the current value.
	Value() ([]byte, error)
	// Error returns the error that stopped the iterator, if any.
	Error() error
	// Close releases the iterator. It returns the error that stopped the
	// iterator, if any, but nil for ErrClosed: the store's Close ended
	// it, and nothing went wrong in the iterator (enginetest's Close
	// checks it). A second Close returns nil.
	Close() error
}

// Batch is an atomic group of writes and the conditions they depend on. It
// is not safe for concurrent use. A batch copies what it is given (keys,
// values, a condition's bytes): the caller may reuse its buffers as soon as
// a call returns. The packages above recycle buffers on their hot paths,
// so an engine that kept the caller's slices would send whatever the next
// write put there (enginetest's BatchCopies checks it).
//
// Writes apply in the order they were added: a later write to a key wins,
// a Set after a DeleteRange over its key survives. Conditions are checked
// against the store as it is before the batch, atomically with the writes:
// no other batch commits between the check and the apply. A batch of
// conditions only (a guard with nothing to write) is checked the same way,
// against every batch committed before Apply was called, never a replica's
// view that may lag (etcd answers such a txn from the member it reaches
// unless it also reads: see etcdkv).
type Batch interface {
	// Set stores value at key. A write over the engine's limits is
	// ErrInvalid, here or at Apply, and the whole batch is refused.
	Set(key, value []byte) error
	// Delete removes key.
	Delete(key []byte) error
	// DeleteRange removes every key in [lo, hi).
	DeleteRange(lo, hi []byte) error
	// Require adds a condition that must hold at commit for the batch to
	// apply; otherwise Apply fails with ErrConditionFailed and writes
	// nothing. A malformed condition (an unknown kind, an empty key, an
	// empty range) is ErrInvalid, here and again at Apply.
	Require(c Cond) error
	// Empty reports whether the batch holds no writes.
	Empty() bool
	// Len is the number of writes in the batch.
	Len() int
	// Size is the batch's size in bytes.
	Size() int
	// Apply commits the batch: when it returns nil every write is visible
	// to readers. With sync, the writes may not yet be durable: Wait
	// blocks until they are. A batch over the engine's limits fails with
	// ErrInvalid; a failed condition with ErrConditionFailed; a commit
	// whose outcome is unknown with ErrUnknownOutcome.
	Apply(sync bool) error
	// Wait blocks until an Apply(true) is durable. After Apply(false), or
	// on an engine that is durable when Apply returns, it returns at once.
	Wait() error
	// Close releases the batch. After an Apply(true) that was not waited
	// for it waits for the sync first (an engine must not release what
	// its commit still holds), without reporting its outcome: Wait does.
	Close() error
}

// CondKind is what a Cond asserts.
type CondKind uint8

const (
	// KeyAbsent holds when Key is not stored.
	KeyAbsent CondKind = iota + 1
	// KeyPresent holds when Key is stored.
	KeyPresent
	// KeyEquals holds when Key is stored with exactly Value.
	KeyEquals
	// RangeEmpty holds when no key is stored in [Key, End).
	RangeEmpty
)

// Cond is a commit-time condition on the store's state before the batch.
type Cond struct {
	Kind  CondKind
	Key   []byte
	End   []byte // RangeEmpty only
	Value []byte // KeyEquals only
}

// Absent is the condition that key is not stored.
func Absent(key []byte) Cond { return Cond{Kind: KeyAbsent, Key: key} }

// Present is the condition that key is stored.
func Present(key []byte) Cond { return Cond{Kind: KeyPresent, Key: key} }

// Equals is the condition that key is stored with exactly value.
func Equals(key, value []byte) Cond { return Cond{Kind: KeyEquals, Key: key, Value: value} }

// Empty is the condition that no key is stored in [lo, hi).
func Empty(lo, hi []byte) Cond { return Cond{Kind: RangeEmpty, Key: lo, End: hi} }

// Size is the condition's size in bytes, for batch limits.
func (c Cond) Size() int { return len(c.Key) + len(c.End) + len(c.Value) }

// Check returns an error matching ErrInvalid for a condition no engine can
// evaluate: one on an empty key, on an empty or unbounded range, or of an
// unknown kind. Every engine's Batch.Require refuses those with it.
func (c Cond) Check() error {
	switch c.Kind {
	case KeyAbsent, KeyPresent, KeyEquals:
		if len(c.Key) == 0 {
			return fmt.Errorf("%w: condition on an empty key", ErrInvalid)
		}
	case RangeEmpty:
		if len(c.Key) == 0 || bytes.Compare(c.Key, c.End) >= 0 {
			return fmt.Errorf("%w: condition on an empty or unbounded range [%x, %x)", ErrInvalid, c.Key, c.End)
		}
	default:
		return fmt.Errorf("%w: unknown condition kind %d", ErrInvalid, c.Kind)
	}
	return nil
}

// Watcher is implemented by engines that push changes (Caps.Watch).
type Watcher interface {
	// Watch returns a channel that receives a value, at least once, after
	// a change to a key in [lo, hi) commits, from this process or another.
	// Spurious wake-ups are allowed; missed changes are not, from the
	// moment Watch returns. The channel is closed when ctx ends, the watch
	// breaks (the caller should re-read and watch again) or the store
	// closes.
	Watch(ctx context.Context, lo, hi []byte) (<-chan struct{}, error)
}

// Admin is implemented by engines that can be maintained: the command line
// tool and benchmarks use it. Every method may return ErrClosed.
type Admin interface {
	// Flush writes in-memory tables to disk.
	Flush() error
	// Compact compacts the keys in [lo, hi), reclaiming deleted space.
	Compact(lo, hi []byte) error
	// DiskUsage is the store's size on disk in bytes.
	DiskUsage() (uint64, error)
	// Metrics describes the engine's state for people.
	Metrics() (string, error)
}
