// Package sharedstore turns one exclusive store into several handles that
// declare themselves shared (Caps.Shared), as if each were another process
// on a shared engine. The tests of tipkv's packages use it to run their
// shared-mode code paths, with their conditions, retries and polling, under
// the race detector, without a network engine.
//
// Every handle reads and writes the same keys; a commit through any handle
// wakes the watches of every handle. Memory of one handle is never seen by
// another: that is the point.
package sharedstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tipkv/tipkv/engine"
)

// Options shape the handles.
type Options struct {
	// NoWatch makes the handles declare no Watch, so waits poll.
	NoWatch bool
	// PollInterval is declared in Caps when NoWatch is set. The default is
	// 5 ms.
	PollInterval time.Duration
	// MaxBatchOps and MaxBatchBytes are declared in Caps and enforced, to
	// exercise the packages' limits as a network engine would.
	MaxBatchOps, MaxBatchBytes int
	// ClockSkew is declared in Caps.
	ClockSkew time.Duration
}

// Hub owns the underlying store and hands out handles.
type Hub struct {
	s    engine.Store
	opts Options

	mu   sync.Mutex
	refs int
	gen  chan struct{} // closed and replaced at every commit
}

// New returns a hub over s; it closes s when its last handle closes.
func New(s engine.Store, opts Options) *Hub {
	if opts.PollInterval == 0 {
		opts.PollInterval = 5 * time.Millisecond
	}
	return &Hub{s: s, opts: opts, gen: make(chan struct{})}
}

// Handle returns a new handle.
func (h *Hub) Handle() engine.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refs++
	return &handle{h: h}
}

func (h *Hub) committed() {
	h.mu.Lock()
	close(h.gen)
	h.gen = make(chan struct{})
	h.mu.Unlock()
}

func (h *Hub) generation() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

type handle struct {
	h      *Hub
	mu     sync.Mutex
	closed atomic.Bool // set under mu
	done   chan struct{}
}

var _ engine.Watcher = (*handle)(nil)

func (x *handle) isClosed() bool { return x.closed.Load() }

func (x *handle) Get(key []byte) ([]byte, error) {
	if x.isClosed() {
		return nil, engine.ErrClosed
	}
	return x.h.s.Get(key)
}

func (x *handle) NewIter(lo, hi []byte) (engine.Iter, error) {
	if x.isClosed() {
		return nil, engine.ErrClosed
	}
	it, err := x.h.s.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	return &iter{Iter: it, x: x}, nil
}

func (x *handle) NewSnapshot() (engine.Snapshot, error) {
	if x.isClosed() {
		return nil, engine.ErrClosed
	}
	snap, err := x.h.s.NewSnapshot()
	if err != nil {
		return nil, err
	}
	return &snapshot{Snapshot: snap, x: x}, nil
}

// snapshot is a view read through a handle: it ends when the handle
// closes, as the contract says of a store's snapshots, although the store
// under the hub stays open for the other handles.
type snapshot struct {
	engine.Snapshot
	x *handle
}

func (s *snapshot) Get(key []byte) ([]byte, error) {
	if s.x.isClosed() {
		return nil, engine.ErrClosed
	}
	return s.Snapshot.Get(key)
}

func (s *snapshot) NewIter(lo, hi []byte) (engine.Iter, error) {
	if s.x.isClosed() {
		return nil, engine.ErrClosed
	}
	it, err := s.Snapshot.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	return &iter{Iter: it, x: s.x}, nil
}

// iter is an iterator opened through a handle: once the handle closes, it
// stops with ErrClosed at its next step, as the contract says.
type iter struct {
	engine.Iter
	x *handle
}

func (it *iter) step(moved bool) bool { return moved && !it.x.isClosed() }

func (it *iter) SeekGE(k []byte) bool       { return it.step(it.Iter.SeekGE(k)) }
func (it *iter) SeekPrefixGE(k []byte) bool { return it.step(it.Iter.SeekPrefixGE(k)) }
func (it *iter) First() bool                { return it.step(it.Iter.First()) }
func (it *iter) Last() bool                 { return it.step(it.Iter.Last()) }
func (it *iter) Next() bool                 { return it.step(it.Iter.Next()) }
func (it *iter) NextPrefix() bool           { return it.step(it.Iter.NextPrefix()) }
func (it *iter) Valid() bool                { return it.step(it.Iter.Valid()) }

func (it *iter) Value() ([]byte, error) {
	if it.x.isClosed() {
		return nil, engine.ErrClosed
	}
	return it.Iter.Value()
}

func (it *iter) Error() error {
	if it.x.isClosed() {
		return engine.ErrClosed
	}
	return it.Iter.Error()
}

func (x *handle) NewBatch() engine.Batch {
	return &batch{Batch: x.h.s.NewBatch(), x: x}
}

func (x *handle) Caps() engine.Caps {
	c := x.h.s.Caps()
	c.Shared = true
	c.Watch = !x.h.opts.NoWatch
	if c.Watch {
		c.PollInterval = 0
	} else {
		c.PollInterval = x.h.opts.PollInterval
	}
	if x.h.opts.MaxBatchOps > 0 {
		c.MaxBatchOps = x.h.opts.MaxBatchOps
	}
	if x.h.opts.MaxBatchBytes > 0 {
		c.MaxBatchBytes = x.h.opts.MaxBatchBytes
	}
	c.ClockSkew = x.h.opts.ClockSkew
	return c
}

// Watch wakes on every commit of any handle (spurious wake-ups are allowed
// by the contract).
func (x *handle) Watch(ctx context.Context, lo, hi []byte) (<-chan struct{}, error) {
	if x.h.opts.NoWatch {
		return nil, engine.ErrInvalid
	}
	x.mu.Lock()
	if x.closed.Load() {
		x.mu.Unlock()
		return nil, engine.ErrClosed
	}
	if x.done == nil {
		x.done = make(chan struct{})
	}
	done := x.done
	x.mu.Unlock()
	out := make(chan struct{}, 1)
	gen := x.h.generation() // before returning: no commit after Watch is missed
	go func() {
		defer close(out)
		for {
			select {
			case <-gen:
				gen = x.h.generation()
				select {
				case out <- struct{}{}:
				default:
				}
			case <-ctx.Done():
				return
			case <-done:
				return
			}
		}
	}()
	return out, nil
}

func (x *handle) Close() error {
	x.mu.Lock()
	if x.closed.Load() {
		x.mu.Unlock()
		return engine.ErrClosed
	}
	x.closed.Store(true)
	if x.done != nil {
		close(x.done)
	}
	x.mu.Unlock()
	x.h.mu.Lock()
	x.h.refs--
	last := x.h.refs == 0
	x.h.mu.Unlock()
	if last {
		return x.h.s.Close()
	}
	return nil
}

type batch struct {
	engine.Batch
	x   *handle
	ops int
	err error
}

func (b *batch) count() error {
	b.ops++
	if m := b.x.h.opts.MaxBatchOps; m > 0 && b.ops > m && b.err == nil {
		b.err = engine.ErrInvalid
	}
	return b.err
}

func (b *batch) Set(k, v []byte) error {
	if err := b.count(); err != nil {
		return err
	}
	return b.Batch.Set(k, v)
}

func (b *batch) Delete(k []byte) error {
	if err := b.count(); err != nil {
		return err
	}
	return b.Batch.Delete(k)
}

func (b *batch) DeleteRange(lo, hi []byte) error {
	if err := b.count(); err != nil {
		return err
	}
	return b.Batch.DeleteRange(lo, hi)
}

func (b *batch) Apply(sync bool) error {
	if b.err != nil {
		return b.err
	}
	if m := b.x.h.opts.MaxBatchBytes; m > 0 && b.Batch.Size() > m {
		return engine.ErrInvalid
	}
	if b.x.isClosed() {
		return engine.ErrClosed
	}
	if err := b.Batch.Apply(sync); err != nil {
		return err
	}
	b.x.h.committed()
	return nil
}
