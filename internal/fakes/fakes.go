// Package fakes wraps an engine.Store for tests that need a hand on it
// that no real engine gives: a store borrowed from the DB that owns it,
// that counts the commit conditions that failed below it, and that lets a
// test act between two steps of a pass when an iterator closes. Its
// sibling faultstore injects failures; fakes injects none.
package fakes

import (
	"bytes"
	"errors"
	"sync/atomic"

	"github.com/tipkv/tipkv/engine"
)

// Borrowed is a store a test opens a DB of its own on, while the DB it
// borrowed the store from still owns it: its Close does nothing (the
// owner closes the store). Everything else goes to the store, with two
// additions: it counts the commits that failed a condition below it, and
// it runs a hook set with OnIterClose. It is safe for concurrent use.
type Borrowed struct {
	engine.Store
	failed atomic.Int64
	hook   atomic.Pointer[closeHook]
}

// Borrow returns s, borrowed.
func Borrow(s engine.Store) *Borrowed { return &Borrowed{Store: s} }

// Close does nothing: the DB the store was borrowed from closes it.
func (s *Borrowed) Close() error { return nil }

// FailedConditions returns how many commits through s the store refused
// with engine.ErrConditionFailed: conditions that really failed, below
// any fault a wrapper above s injects.
func (s *Borrowed) FailedConditions() int64 { return s.failed.Load() }

// NewBatch returns the store's batch, counted when its commit fails a
// condition.
func (s *Borrowed) NewBatch() engine.Batch {
	return &countingBatch{Batch: s.Store.NewBatch(), s: s}
}

type countingBatch struct {
	engine.Batch
	s *Borrowed
}

func (b *countingBatch) Apply(sync bool) error {
	err := b.Batch.Apply(sync)
	if errors.Is(err, engine.ErrConditionFailed) {
		b.s.failed.Add(1)
	}
	return err
}

type closeHook struct {
	match func(lo []byte) bool // on the iterator's lower bound
	f     func()
}

// OnIterClose makes f run once, after the first iterator whose lower bound
// matches is closed: a test acts there between two steps of a pass. A
// later call replaces a hook that has not run.
func (s *Borrowed) OnIterClose(match func(lo []byte) bool, f func()) {
	s.hook.Store(&closeHook{match, f})
}

// NewIter returns the store's iterator, which runs the OnIterClose hook
// when it is closed.
func (s *Borrowed) NewIter(lo, hi []byte) (engine.Iter, error) {
	it, err := s.Store.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	return &hookIter{Iter: it, s: s, lo: bytes.Clone(lo)}, nil
}

type hookIter struct {
	engine.Iter
	s  *Borrowed
	lo []byte
}

func (it *hookIter) Close() error {
	err := it.Iter.Close()
	if h := it.s.hook.Load(); h != nil && h.match(it.lo) && it.s.hook.CompareAndSwap(h, nil) {
		h.f()
	}
	return err
}
