// Package storage is the seam between tipkv's packages and the ordered
// key-value engine under them. versioned/ and queue/ speak only to these
// interfaces; internal/storage/pebblestore implements them on Pebble, and a
// distributed ordered engine can implement them later without touching the
// packages above.
//
// Keys and their order are codec's: bytewise, with codec.Split marking the
// prefix of numbered keys.
package storage

import "errors"

// ErrNotFound is returned by Store.Get for a missing key.
var ErrNotFound = errors.New("tipkv: not found")

// ErrClosed is returned by every call on a closed Store, Iter or Batch.
var ErrClosed = errors.New("tipkv: closed")

// Store is an ordered key-value store. It is safe for concurrent use.
type Store interface {
	// Get returns a copy of the value stored at key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// NewIter returns an iterator over the keys in [lo, hi). Both bounds are
	// required: no read in tipkv is unbounded. The iterator holds the store
	// open until it is closed.
	NewIter(lo, hi []byte) (Iter, error)
	// NewBatch returns an empty write batch.
	NewBatch() Batch
	// Flush writes the memtable to disk.
	Flush() error
	// Compact compacts the keys in [lo, hi), reclaiming deleted space.
	Compact(lo, hi []byte) error
	// DiskUsage is the store's size on disk in bytes.
	DiskUsage() uint64
	// Metrics describes the engine's state (levels, tombstones, cache) for
	// people.
	Metrics() string
	// Close waits for calls in flight and open iterators, then closes the
	// store. Later calls return ErrClosed.
	Close() error
}

// Iter is a bounded forward iterator. It is not safe for concurrent use.
// Key and Value are valid until the next positioning call.
type Iter interface {
	// SeekGE moves to the first key >= key.
	SeekGE(key []byte) bool
	// SeekPrefixGE moves to the first key >= key that has key's prefix
	// (codec.Split), consulting bloom filters; later Next calls stay within
	// that prefix.
	SeekPrefixGE(key []byte) bool
	// First moves to the first key of the range.
	First() bool
	// Last moves to the last key of the range. It is for finding where an
	// oldest-first range ends (a queue's tail at open); newest-first reads
	// never iterate in reverse.
	Last() bool
	// SeekLT moves to the last key < key. Same caveat as Last.
	SeekLT(key []byte) bool
	// Next moves to the next key.
	Next() bool
	// NextPrefix moves to the first key with a greater prefix.
	NextPrefix() bool
	// Valid reports whether the iterator is at a key.
	Valid() bool
	// Key returns the current key.
	Key() []byte
	// Value returns the current value.
	Value() ([]byte, error)
	// Error returns the error that stopped the iterator, if any.
	Error() error
	// Close releases the iterator.
	Close() error
}

// Batch is an atomic group of writes. It is not safe for concurrent use.
type Batch interface {
	// Set stores value at key.
	Set(key, value []byte) error
	// Delete removes key.
	Delete(key []byte) error
	// DeleteRange removes every key in [lo, hi).
	DeleteRange(lo, hi []byte) error
	// Empty reports whether the batch holds no writes.
	Empty() bool
	// Size is the batch's size in bytes.
	Size() int
	// Apply commits the batch: when it returns nil every write is visible
	// to readers. With sync, the writes may not yet be durable: Wait
	// blocks until they are.
	Apply(sync bool) error
	// Wait blocks until an Apply(true) is durable. After Apply(false) it
	// returns at once.
	Wait() error
	// Close releases the batch.
	Close() error
}
