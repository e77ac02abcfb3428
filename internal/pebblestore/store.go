// Package pebblestore implements the storage contract on Pebble, in
// process. It and the benchmarks' baselines are the only code in tipkv that
// imports Pebble.
//
// The store is exclusive (Caps.Shared is false): Pebble locks the directory,
// so one process writes it, and the packages above keep their authority in
// memory. It still honours every part of the contract: conditions are
// checked under a commit lock, atomically with the writes.
package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tipkv/tipkv/engine"
)

// FormatMajorVersion is pinned by name: the newest format of Pebble v2.1.x.
// A test fails when Pebble's newest format moves, so an upgrade is a choice.
const FormatMajorVersion = pebble.FormatValueSeparation

// MinMemTableSize is the smallest memtable Open accepts. Pebble itself
// panics on memtables of a few KiB.
const MinMemTableSize = 64 << 10

// Config is how a store is opened.
type Config struct {
	FS           vfs.FS // nil: the OS file system, or memory with InMemory
	InMemory     bool   // a new store in memory, gone at Close
	CacheSize    int64
	MemTableSize uint64
	ReadOnly     bool
	// FormatVersion is the newest tipkv store format the caller reads: a
	// directory whose marker names a newer one is refused, and a new
	// store's marker names it. The default is 1.
	FormatVersion int
	// Events, if set, hears what Pebble reports (flushes, compactions,
	// stalls, background errors, corruption), after the store has acted on
	// it.
	Events func(Event)
	// DiskSlowThreshold is how long a disk write or sync may take before
	// the store reports the disk slow (EventDiskSlow). The default is 5
	// seconds, Pebble's; negative turns the check off.
	DiskSlowThreshold time.Duration
	// Logger, if set, logs the same events at their Level. Its handler
	// runs on Pebble's goroutines, some of them holding Pebble's locks: it
	// must not block for long, nor call the store. Nil: nothing is logged.
	Logger *slog.Logger
}

// Event is something Pebble reported, for logging.
type Event struct {
	Kind  string // one of the Event constants (EventFlush, ...)
	Error error  // for errors
	Info  string // Pebble's description
}

// Options returns the Pebble options tipkv runs with, for cfg and cache.
// The store and every raw-Pebble baseline in the benchmarks use it, so a
// baseline cannot drift from what it is compared with. The caller owns
// cache (Unref it after Open).
func Options(cfg Config, cache *pebble.Cache) *pebble.Options {
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
	return opts
}

// Store is an engine.Store on Pebble.
type Store struct {
	db          *pebble.DB
	gate        gate
	f           faults
	compactions compactions // Pebble's compaction scheduler

	fs       vfs.FS
	dir      string
	format   int
	marker   Marker
	inMemory bool
	readOnly bool
	health   io.Closer     // the disk health checks, closed after Pebble; nil if off
	opened   chan struct{} // closed when Open has set db (or failed)

	// commitMu orders conditional batches against every other batch: a
	// batch with conditions holds it exclusively from the check to the
	// moment its writes are visible; any other batch holds it shared while
	// it applies. Nothing holds it across a durability wait.
	commitMu sync.RWMutex
}

var (
	_ engine.Store = (*Store)(nil)
	_ engine.Admin = (*Store)(nil)
)

// Open opens or creates the store in dir: a directory that is empty or
// missing (a new store), or that holds a tipkv store (its marker file
// names a format no newer than cfg.FormatVersion). Anything else is
// refused without a change: a directory that is not a tipkv store or of a
// newer format with engine.ErrFormat, one that is locked by another
// process (or this one) with engine.ErrLocked, one whose files were lost
// with codec.ErrCorrupt.
func Open(dir string, cfg Config) (s *Store, err error) {
	if cfg.MemTableSize != 0 && cfg.MemTableSize < MinMemTableSize {
		return nil, fmt.Errorf("%w: MemTableSize %d is under the minimum of %d bytes", engine.ErrInvalid, cfg.MemTableSize, MinMemTableSize)
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default
		if cfg.InMemory {
			cfg.FS = vfs.NewMem()
		}
	}
	if cfg.FormatVersion == 0 {
		cfg.FormatVersion = 1
	}
	m, err := prepareDir(cfg.FS, dir, cfg.FormatVersion, cfg.ReadOnly)
	if err != nil {
		return nil, err
	}
	cache := pebble.NewCache(cfg.CacheSize)
	defer cache.Unref()
	opts := Options(cfg, cache)
	s = &Store{fs: cfg.FS, dir: dir, format: cfg.FormatVersion, marker: m, inMemory: cfg.InMemory, readOnly: cfg.ReadOnly}
	s.opened = make(chan struct{})
	defer close(s.opened)
	s.gate.init()
	s.f.init(s, cfg.Events, cfg.Logger)
	s.compactions.init()
	opts.EnsureDefaults()
	s.f.l0.stop = opts.L0StopWritesThreshold
	opts.Logger = &s.f
	opts.EventListener = s.f.listener()
	opts.Experimental.CompactionScheduler = &s.compactions
	// Pebble times disk operations only through a wrapping file system
	// (its WithFSDefaults): without it the DiskSlow event never fires.
	if cfg.DiskSlowThreshold == 0 {
		cfg.DiskSlowThreshold = 5 * time.Second
	}
	if cfg.DiskSlowThreshold > 0 {
		var health io.Closer
		opts.FS, health = vfs.WithDiskHealthChecks(opts.FS, cfg.DiskSlowThreshold, nil, opts.EventListener.DiskSlow)
		s.health = health
		defer func() {
			if err != nil {
				_ = health.Close() // s is nil by now
			}
		}()
	}
	if cfg.ReadOnly {
		// Pebble takes the directory lock by creating LOCK for writing,
		// which a read-only file system refuses. Nothing can write to such
		// a store, so a read-only open goes on without the lock there.
		opts.FS = readOnlyLockFS{opts.FS}
	}
	// A fatal error inside Pebble's Open (a corrupt manifest, a table that
	// cannot be read) is reported through the logger; it unwinds to here.
	defer s.f.recoverFatal(&err)
	db, err := pebble.Open(dir, opts)
	if err != nil {
		s.compactions.abandon()
		if isLockError(err) {
			return nil, fmt.Errorf("%w: the store is already open, in another process or this one (%v)", engine.ErrLocked, err)
		}
		return nil, s.f.wrap(err)
	}
	s.db = db
	return s, nil
}

// Caps implements engine.Store. Pebble's only limit is its batch size
// (4 GiB); a batch is refused before it gets there.
func (s *Store) Caps() engine.Caps {
	return engine.Caps{MaxBatchBytes: MaxBatchBytes}
}

// MaxBatchBytes is the largest batch the store takes: under Pebble's limit
// of 4 GiB, with room for its per-entry overhead.
const MaxBatchBytes = 4<<30 - 64<<20

// exit ends a call, and closes Pebble if a Close is waiting on it.
func (s *Store) exit() {
	if s.gate.exit() {
		_, _ = s.finish()
	}
}

// enter lets a call in, or says why not.
func (s *Store) enter() error {
	if !s.gate.enter() {
		return engine.ErrClosed
	}
	if err := s.f.failure(); err != nil {
		s.exit()
		return err
	}
	return nil
}

// Get implements engine.Store.
func (s *Store) Get(key []byte) (_ []byte, err error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	defer s.f.recoverFatal(&err)
	return get(s.db, &s.f, key)
}

// GetAppend implements engine.Appender.
func (s *Store) GetAppend(dst, key []byte) (_ []byte, err error) {
	if err := s.enter(); err != nil {
		return dst, err
	}
	defer s.exit()
	defer s.f.recoverFatal(&err)
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, engine.ErrNotFound
	}
	if err != nil {
		return dst, s.f.wrap(err)
	}
	dst = append(dst, v...)
	return dst, closer.Close()
}

func get(r pebble.Reader, f *faults, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, engine.ErrNotFound
	}
	if err != nil {
		return nil, f.wrap(err)
	}
	out := append(make([]byte, 0, len(v)), v...)
	return out, closer.Close()
}

// NewIter implements engine.Store.
func (s *Store) NewIter(lo, hi []byte) (engine.Iter, error) {
	return s.newIter(s.db, lo, hi)
}

func (s *Store) newIter(r pebble.Reader, lo, hi []byte) (_ engine.Iter, err error) {
	// Pebble's invariant checks (on in race builds) read the first byte of
	// a lower bound, so an empty one is refused along with a missing one.
	if len(lo) == 0 || hi == nil {
		return nil, fmt.Errorf("tipkv: internal error: unbounded iterator [%x, %x)", lo, hi)
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.f.recoverFatal(&err)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi, UseL6Filters: true})
	if err != nil {
		s.exit()
		return nil, s.f.wrap(err)
	}
	// The iterator holds the store open, but Close does not wait for it:
	// Close ends it at its next call (see iter).
	s.gate.detach()
	return &iter{it: it, s: s}, nil
}

// NewSnapshot implements engine.Store.
func (s *Store) NewSnapshot() (engine.Snapshot, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	s.gate.detach()
	return &snapshot{s: s, snap: s.db.NewSnapshot()}, nil
}

// NewBatch implements engine.Store.
func (s *Store) NewBatch() engine.Batch { return s.newBatch() }

// Flush implements engine.Admin.
func (s *Store) Flush() (err error) {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if s.f.l0.full.Load() {
		return s.f.l0Error()
	}
	defer s.f.recoverFatal(&err)
	return s.f.wrap(s.db.Flush())
}

// Compact implements engine.Admin. Once a compaction has met a corrupt
// table the store runs no compaction (see compactions): Compact then
// returns that error, matching codec.ErrCorrupt and naming the table, at
// once or as soon as a compaction in progress meets it, never waits for
// compactions that will not run.
func (s *Store) Compact(lo, hi []byte) (err error) {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	defer s.f.recoverFatal(&err)
	if err := s.compactions.stoppedBy(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.compactions.stopped:
			cancel() // Pebble drops the manual compactions not started
		case <-ctx.Done():
		}
	}()
	err = s.db.Compact(ctx, lo, hi, true)
	if stop := s.compactions.stoppedBy(); stop != nil {
		return stop
	}
	return s.f.wrap(err)
}

// DiskUsage implements engine.Admin: the blocks every file in the store's
// directory takes on disk, the write-ahead log's preallocated space
// included (see usage).
func (s *Store) DiskUsage() (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.exit()
	u, err := s.usage()
	return u.total, err
}

// Metrics implements engine.Admin.
func (s *Store) Metrics() (string, error) {
	m, err := s.PebbleMetrics()
	if err != nil {
		return "", err
	}
	return m.String(), nil
}

// PebbleMetrics returns Pebble's metrics, for tools and tests.
func (s *Store) PebbleMetrics() (*pebble.Metrics, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	return s.db.Metrics(), nil
}

// FilterStats returns how often the bloom filters were consulted since the
// store was opened: hits avoided a data block read, misses did not. For
// tests and benchmarks.
func (s *Store) FilterStats() (hits, misses int64) {
	m, err := s.PebbleMetrics()
	if err != nil {
		return 0, 0
	}
	return m.Filter.Hits, m.Filter.Misses
}

// Corruptions returns the corruptions Pebble has reported since the store
// was opened: each names a file.
func (s *Store) Corruptions() []error { return s.f.corruptions() }

// Close implements engine.Store. It waits for calls in flight (reads,
// commits, durability waits), then closes Pebble; iterators and snapshots
// still open end with ErrClosed at their next call, and Pebble is closed
// when the last of them is released. A store that failed (see faults) is
// not closed: Pebble cannot close cleanly then, and its files stay open
// until the process exits; Close returns the failure.
func (s *Store) Close() error {
	if !s.gate.close(s.f.stalled) {
		return engine.ErrClosed
	}
	if won, err := s.finish(); won {
		return err
	}
	if s.gate.held.Load() == 0 {
		<-s.gate.done // another goroutine is closing Pebble now
	}
	return nil
}

// finish closes Pebble once nothing uses it: called by Close, by the last
// call or iterator or snapshot released after Close. It reports whether
// the caller was the one to do it.
func (s *Store) finish() (bool, error) {
	if !s.gate.finish(s.f.stalled) {
		return false, nil // someone still holds the store; the last one closes it
	}
	defer close(s.gate.done)
	return true, s.closePebble()
}

func (s *Store) closePebble() error {
	if err := s.f.failure(); err != nil {
		return fmt.Errorf("tipkv: close: the store failed and was left open: %w", err)
	}
	if s.f.stalled() {
		// Writes are blocked in Pebble on a disk that fails: Pebble cannot
		// close under them.
		return fmt.Errorf("tipkv: close: writes are blocked on a failing disk; the store was left open: %w", s.f.background())
	}
	var err error
	func() {
		defer s.f.recoverFatal(&err)
		err = s.db.Close()
	}()
	if s.health != nil {
		_ = s.health.Close()
	}
	return err
}

// iter wraps a Pebble iterator. After the store closes, its next call ends
// it: it releases the Pebble iterator and reports ErrClosed.
type iter struct {
	it     *pebble.Iterator
	s      *Store
	err    error // ErrClosed once ended by Close
	closed bool
}

func (i *iter) live() bool {
	if i.closed {
		return false
	}
	if i.s.gate.closed.Load() {
		i.err = engine.ErrClosed
		i.release()
		return false
	}
	return true
}

func (i *iter) SeekGE(key []byte) bool       { return i.live() && i.it.SeekGE(key) }
func (i *iter) SeekPrefixGE(key []byte) bool { return i.live() && i.it.SeekPrefixGE(key) }
func (i *iter) First() bool                  { return i.live() && i.it.First() }
func (i *iter) Last() bool                   { return i.live() && i.it.Last() }
func (i *iter) Next() bool                   { return i.live() && i.it.Next() }
func (i *iter) NextPrefix() bool             { return i.live() && i.it.NextPrefix() }
func (i *iter) Valid() bool                  { return !i.closed && i.it.Valid() }

// PointsRead returns how many point keys the iterator has stepped on so
// far, tombstones included (Pebble's InternalStats.PointCount), 0 once it
// is closed: tests prove with it that a read walks no deleted keys.
func (i *iter) PointsRead() uint64 {
	if i.closed {
		return 0
	}
	return i.it.Stats().InternalStats.PointCount
}

func (i *iter) Key() []byte {
	if i.closed {
		return nil
	}
	return i.it.Key()
}

func (i *iter) Value() ([]byte, error) {
	if i.closed {
		return nil, i.Error()
	}
	v, err := i.it.ValueAndErr()
	return v, i.s.f.wrap(err)
}

func (i *iter) Error() error {
	if i.closed {
		if i.err != nil {
			return i.err
		}
		return engine.ErrClosed
	}
	return i.s.f.wrap(i.it.Error())
}

func (i *iter) Close() error {
	if i.closed {
		return nil
	}
	err := i.s.f.wrap(i.it.Close())
	i.closed = true
	i.it = nil
	if i.s.gate.release() {
		if _, cerr := i.s.finish(); err == nil {
			err = cerr
		}
	}
	return err
}

// release ends the iterator on behalf of Close.
func (i *iter) release() {
	_ = i.it.Close()
	i.closed = true
	i.it = nil
	if i.s.gate.release() {
		_, _ = i.s.finish()
	}
}

type snapshot struct {
	s      *Store
	snap   *pebble.Snapshot
	closed atomic.Bool
}

func (sn *snapshot) Get(key []byte) (_ []byte, err error) {
	if sn.closed.Load() {
		return nil, engine.ErrClosed
	}
	if err := sn.s.enter(); err != nil {
		return nil, err
	}
	defer sn.s.exit()
	defer sn.s.f.recoverFatal(&err)
	return get(sn.snap, &sn.s.f, key)
}

func (sn *snapshot) NewIter(lo, hi []byte) (engine.Iter, error) {
	if sn.closed.Load() {
		return nil, engine.ErrClosed
	}
	return sn.s.newIter(sn.snap, lo, hi)
}

func (sn *snapshot) Close() error {
	if sn.closed.Swap(true) {
		return nil
	}
	err := sn.snap.Close()
	if sn.s.gate.release() {
		if _, cerr := sn.s.finish(); err == nil {
			err = cerr
		}
	}
	return err
}

// quietLogger drops Pebble's informational lines; it is the logger of the
// raw-Pebble baselines that share Options (a Store has its own).
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	pebble.DefaultLogger.Errorf(format, args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}
