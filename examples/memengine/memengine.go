// Package memengine is an ordered key-value engine in memory, written
// outside tipkv's module with its exported packages only: the proof that
// anyone can give tipkv an engine of their own, and a starting point for
// one (README.md says what the contract asks and what the suites check).
//
// A Memory holds the keys; a Store is a handle on it that implements
// engine.Store, engine.Watcher and engine.Appender. The keys outlive the
// stores opened on them, as a file outlives a process, so a Store can be
// closed and the Memory opened again:
//
//	mem := memengine.New()
//	s, _ := mem.Open(nil)
//	db, _ := tipkv.OpenEngine(s, "memory", nil) // db.Close closes s
//
// By default a Memory is exclusive, like Pebble's directory: one Store at
// a time, and tipkv keeps versions, sequence numbers and leases in
// memory. With Options.Shared it hands out any number of Stores, each
// declaring a shared engine (engine.Caps.Shared), as the processes sharing
// an etcd cluster or a SQL table would: tipkv then sends a condition with
// every write that depends on a read, and the Memory checks it atomically
// with the writes.
//
// The key space is a persistent balanced tree (a treap): a commit copies
// the O(log n) nodes on its writes' paths and swaps in the new root, so a
// snapshot or an iterator is the root it started on, read without locks,
// and the garbage collector frees what no root reaches. Nothing is
// written to disk.
package memengine

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/tipkv/tipkv/engine"
)

// Memory is a key space in memory. The keys live as long as the Memory,
// whatever Stores are opened on it and closed. It is safe for concurrent
// use.
type Memory struct {
	cur  atomic.Pointer[view] // the latest commit's keys
	seed maphash.Seed         // the treap's priorities

	mu        sync.Mutex // serialises commits; guards what follows
	exclusive bool       // an exclusive Store is open
	shared    int        // shared Stores open
	watchers  map[*watcher]struct{}
}

// New returns an empty Memory.
func New() *Memory {
	m := &Memory{seed: maphash.MakeSeed(), watchers: map[*watcher]struct{}{}}
	m.cur.Store(&view{})
	return m
}

// Options shape a Store. A nil *Options is the zero value.
type Options struct {
	// Shared opens a Store that declares a shared engine, one of any
	// number open on the Memory at once. The default (false) is an
	// exclusive Store: the only one open on the Memory.
	Shared bool
}

// Open returns a Store on m. It fails with engine.ErrLocked while an
// exclusive Store is open on m, or when asked for an exclusive one while
// any Store is open.
func (m *Memory) Open(opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.exclusive:
		return nil, fmt.Errorf("memengine: open: %w: an exclusive store is open", engine.ErrLocked)
	case !o.Shared && m.shared > 0:
		return nil, fmt.Errorf("memengine: open: %w: %d shared stores are open", engine.ErrLocked, m.shared)
	case o.Shared:
		m.shared++
	default:
		m.exclusive = true
	}
	return &Store{m: m, shared: o.Shared, done: make(chan struct{})}, nil
}

// Store is a handle on a Memory that implements engine.Store. It is safe
// for concurrent use. Close closes its iterators, snapshots and watches,
// not those of the other Stores on the Memory.
type Store struct {
	m      *Memory
	shared bool

	closeMu sync.Mutex
	closed  atomic.Bool   // set under closeMu
	done    chan struct{} // closed by Close, ending the watches
}

var (
	_ engine.Store    = (*Store)(nil)
	_ engine.Watcher  = (*Store)(nil)
	_ engine.Appender = (*Store)(nil)
)

// Memory returns the Memory s was opened on: open it again after s
// closes, as a process that restarted would reopen its files.
func (s *Store) Memory() *Memory { return s.m }

// Caps declares an engine that pushes changes (Watch) and has no limits
// on batches or values; Shared as the Store was opened.
func (s *Store) Caps() engine.Caps { return engine.Caps{Shared: s.shared, Watch: true} }

// Get returns a copy of the value stored at key, or engine.ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) { return s.GetAppend(nil, key) }

// GetAppend appends the value stored at key to dst, or returns
// engine.ErrNotFound with dst unchanged.
func (s *Store) GetAppend(dst, key []byte) ([]byte, error) {
	if s.closed.Load() {
		return dst, engine.ErrClosed
	}
	return s.m.cur.Load().getAppend(dst, key)
}

// NewIter returns an iterator over [lo, hi) of the latest commit.
func (s *Store) NewIter(lo, hi []byte) (engine.Iter, error) {
	if s.closed.Load() {
		return nil, engine.ErrClosed
	}
	return newIter(s, s.m.cur.Load(), lo, hi)
}

// NewSnapshot returns the latest commit's keys, which later commits leave
// alone. It holds no resources beyond memory.
func (s *Store) NewSnapshot() (engine.Snapshot, error) {
	if s.closed.Load() {
		return nil, engine.ErrClosed
	}
	return &snapshot{s: s, v: s.m.cur.Load()}, nil
}

// NewBatch returns an empty batch.
func (s *Store) NewBatch() engine.Batch { return &batch{s: s} }

// Close closes s: its iterators stop with engine.ErrClosed, its snapshots
// and batches refuse further calls, its watches end, and the Memory may
// be opened again. A second Close returns engine.ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Load() {
		return engine.ErrClosed
	}
	s.closed.Store(true)
	close(s.done)
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.shared {
		s.m.shared--
	} else {
		s.m.exclusive = false
	}
	return nil
}

// snapshot is one commit's keys read through a Store.
type snapshot struct {
	s *Store
	v *view
}

func (sn *snapshot) Get(key []byte) ([]byte, error) {
	if sn.s.closed.Load() {
		return nil, engine.ErrClosed
	}
	return sn.v.getAppend(nil, key)
}

func (sn *snapshot) NewIter(lo, hi []byte) (engine.Iter, error) {
	if sn.s.closed.Load() {
		return nil, engine.ErrClosed
	}
	return newIter(sn.s, sn.v, lo, hi)
}

// Close releases nothing: the garbage collector takes the keys once no
// iterator reads them.
func (sn *snapshot) Close() error { return nil }
