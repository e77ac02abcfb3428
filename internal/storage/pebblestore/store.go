// Package pebblestore implements the storage seam on Pebble. It is the only
// package in tipkv that imports Pebble.
package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tipkv/tipkv/internal/storage"
)

// FormatMajorVersion is pinned by name: the newest format of Pebble v2.1.x.
// A test fails when Pebble's newest format moves, so an upgrade is a choice.
const FormatMajorVersion = pebble.FormatValueSeparation

// Config is how a store is opened.
type Config struct {
	FS           vfs.FS // nil: the OS file system
	CacheSize    int64
	MemTableSize uint64
	ReadOnly     bool
}

// Store is a storage.Store on Pebble.
type Store struct {
	db   *pebble.DB
	gate gate
}

var _ storage.Store = (*Store)(nil)

// Open opens or creates the Pebble store in dir.
func Open(dir string, cfg Config) (*Store, error) {
	cache := pebble.NewCache(cfg.CacheSize)
	defer cache.Unref()
	opts := &pebble.Options{
		Comparer:           Comparer,
		Cache:              cache,
		MemTableSize:       cfg.MemTableSize,
		FormatMajorVersion: FormatMajorVersion,
		ReadOnly:           cfg.ReadOnly,
		FS:                 cfg.FS,
		Logger:             quietLogger{},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	// Keep every value in its data block. By default Pebble moves the value
	// of every key but the first of a prefix to separate value blocks (good
	// for MVCC scans that skip old versions), which makes each older
	// version, queue message or feed event after the first cost an extra
	// block lookup: measured on 100,000 documents x 10 versions, AsOf was
	// 1.5x Latest with value blocks and 1.02x without, and History of 10
	// 25% faster without. The price is fatter data blocks: LatestAll is
	// about 12% slower.
	opts.Experimental.SpanPolicyFunc = func([]byte) (pebble.SpanPolicy, []byte, error) {
		return pebble.SpanPolicy{DisableValueSeparationBySuffix: true}, nil, nil
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db}
	s.gate.init()
	return s, nil
}

// Get implements storage.Store.
func (s *Store) Get(key []byte) ([]byte, error) {
	if !s.gate.enter() {
		return nil, storage.ErrClosed
	}
	defer s.gate.exit()
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := append(make([]byte, 0, len(v)), v...)
	return out, closer.Close()
}

// NewIter implements storage.Store.
func (s *Store) NewIter(lo, hi []byte) (storage.Iter, error) {
	// Pebble's invariant checks (on in race builds) read the first byte of
	// a lower bound, so an empty one is refused along with a missing one.
	if len(lo) == 0 || hi == nil {
		return nil, fmt.Errorf("tipkv: internal error: unbounded iterator [%x, %x)", lo, hi)
	}
	if !s.gate.enter() {
		return nil, storage.ErrClosed
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi, UseL6Filters: true})
	if err != nil {
		s.gate.exit()
		return nil, err
	}
	return &iter{it: it, s: s}, nil
}

// NewBatch implements storage.Store.
func (s *Store) NewBatch() storage.Batch { return &batch{b: s.db.NewBatch(), s: s} }

// Flush implements storage.Store.
func (s *Store) Flush() error {
	if !s.gate.enter() {
		return storage.ErrClosed
	}
	defer s.gate.exit()
	return s.db.Flush()
}

// Compact implements storage.Store.
func (s *Store) Compact(lo, hi []byte) error {
	if !s.gate.enter() {
		return storage.ErrClosed
	}
	defer s.gate.exit()
	return s.db.Compact(context.Background(), lo, hi, true)
}

// DiskUsage implements storage.Store.
func (s *Store) DiskUsage() uint64 {
	if !s.gate.enter() {
		return 0
	}
	defer s.gate.exit()
	return s.db.Metrics().DiskSpaceUsage()
}

// Metrics implements storage.Store.
func (s *Store) Metrics() string {
	if !s.gate.enter() {
		return ""
	}
	defer s.gate.exit()
	return s.db.Metrics().String()
}

// PebbleMetrics returns Pebble's metrics, for tools and tests.
func (s *Store) PebbleMetrics() (*pebble.Metrics, error) {
	if !s.gate.enter() {
		return nil, storage.ErrClosed
	}
	defer s.gate.exit()
	return s.db.Metrics(), nil
}

// FilterStats returns how often the bloom filters were consulted since the
// store was opened: hits avoided a data block read, misses did not. For
// tests and benchmarks.
func (s *Store) FilterStats() (hits, misses int64) {
	if !s.gate.enter() {
		return 0, 0
	}
	defer s.gate.exit()
	f := s.db.Metrics().Filter
	return f.Hits, f.Misses
}

// Close implements storage.Store.
func (s *Store) Close() error {
	if !s.gate.close() {
		return storage.ErrClosed
	}
	return s.db.Close()
}

type iter struct {
	it     *pebble.Iterator
	s      *Store
	closed bool
}

func (i *iter) SeekGE(key []byte) bool       { return i.it.SeekGE(key) }
func (i *iter) SeekPrefixGE(key []byte) bool { return i.it.SeekPrefixGE(key) }
func (i *iter) First() bool                  { return i.it.First() }
func (i *iter) Last() bool                   { return i.it.Last() }
func (i *iter) SeekLT(key []byte) bool       { return i.it.SeekLT(key) }
func (i *iter) Next() bool                   { return i.it.Next() }
func (i *iter) NextPrefix() bool             { return i.it.NextPrefix() }
func (i *iter) Valid() bool                  { return i.it.Valid() }
func (i *iter) Key() []byte                  { return i.it.Key() }
func (i *iter) Value() ([]byte, error)       { return i.it.ValueAndErr() }
func (i *iter) Error() error                 { return i.it.Error() }

func (i *iter) Close() error {
	if i.closed {
		return nil
	}
	i.closed = true
	err := i.it.Close()
	i.s.gate.exit()
	return err
}

type batch struct {
	b *pebble.Batch
	s *Store
	// entered is set while an Apply(sync) waits for durability.
	entered bool
}

func (b *batch) Set(key, value []byte) error     { return b.b.Set(key, value, nil) }
func (b *batch) Delete(key []byte) error         { return b.b.Delete(key, nil) }
func (b *batch) DeleteRange(lo, hi []byte) error { return b.b.DeleteRange(lo, hi, nil) }
func (b *batch) Empty() bool                     { return b.b.Empty() }
func (b *batch) Size() int                       { return b.b.Len() }

func (b *batch) Apply(sync bool) error {
	if !b.s.gate.enter() {
		return storage.ErrClosed
	}
	var err error
	if sync {
		err = b.s.db.ApplyNoSyncWait(b.b, pebble.Sync)
		if err == nil {
			b.entered = true // Wait exits the gate
			return nil
		}
	} else {
		err = b.s.db.Apply(b.b, pebble.NoSync)
	}
	b.s.gate.exit()
	return err
}

func (b *batch) Wait() error {
	if !b.entered {
		return nil
	}
	b.entered = false
	defer b.s.gate.exit()
	return b.b.SyncWait()
}

// Close releases the batch, and the store if an Apply(true) was never
// waited for, so that Close of the store cannot hang on it.
func (b *batch) Close() error {
	if b.entered {
		b.entered = false
		b.s.gate.exit()
	}
	return b.b.Close()
}

// gate lets calls in without blocking while the store is open, and lets
// Close wait for those in flight. Entering never blocks, so a call made
// while another is in flight (a read inside an iteration) cannot deadlock
// against a pending Close.
type gate struct {
	n       atomic.Int64
	closed  atomic.Bool
	mu      sync.Mutex
	drained chan struct{}
}

func (g *gate) init() { g.drained = make(chan struct{}, 1) }

func (g *gate) enter() bool {
	g.n.Add(1)
	if g.closed.Load() {
		g.exit()
		return false
	}
	return true
}

func (g *gate) exit() {
	if g.n.Add(-1) == 0 && g.closed.Load() {
		select {
		case g.drained <- struct{}{}:
		default:
		}
	}
}

// close shuts the gate and waits until nothing is inside. It reports false
// if the gate was already closed.
func (g *gate) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Swap(true) {
		return false
	}
	for g.n.Load() > 0 {
		select {
		case <-g.drained:
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	pebble.DefaultLogger.Errorf(format, args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}
