// Package faultstore wraps a store and makes commits fail the ways a shared
// engine's commits fail: a condition that fails (another process wrote
// first), and an outcome that is unknown (the connection broke), either
// after the batch was applied or before. Tests use it to check that
// DB.Update retries exactly the failures it may retry, that no in-memory
// hint survives a commit that did not happen, and that the store stays
// consistent.
package faultstore

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/tipkv/tipkv/engine"
)

// Odds are the chances, each in [0, 1], that a commit fails a given way.
type Odds struct {
	// ConditionFailed: the commit is refused as if a condition failed,
	// and nothing is written. Only batches that carry conditions fail so:
	// an unconditional write cannot lose a race.
	ConditionFailed float64
	// UnknownApplied: the batch is applied, then the commit reports an
	// unknown outcome.
	UnknownApplied float64
	// UnknownLost: nothing is applied, and the commit reports an unknown
	// outcome.
	UnknownLost float64
}

// Store is an engine.Store that injects faults into commits.
type Store struct {
	engine.Store
	odds Odds

	mu  sync.Mutex
	rng *rand.Rand

	// Counts of what was injected.
	Conditions, Applied, Lost atomic.Int64
}

// New wraps s; seed makes the faults repeatable.
func New(s engine.Store, odds Odds, seed uint64) *Store {
	return &Store{Store: s, odds: odds, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// SetOdds changes the odds, for a test that turns faults off to check.
func (s *Store) SetOdds(o Odds) {
	s.mu.Lock()
	s.odds = o
	s.mu.Unlock()
}

func (s *Store) roll() (float64, Odds) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64(), s.odds
}

// NewBatch implements engine.Store.
func (s *Store) NewBatch() engine.Batch { return &batch{Batch: s.Store.NewBatch(), s: s} }

type batch struct {
	engine.Batch
	s     *Store
	conds int
}

func (b *batch) Require(c engine.Cond) error {
	b.conds++
	return b.Batch.Require(c)
}

func (b *batch) Apply(sync bool) error {
	r, o := b.s.roll()
	switch {
	case b.conds > 0 && r < o.ConditionFailed:
		b.s.Conditions.Add(1)
		return fmt.Errorf("%w: injected", engine.ErrConditionFailed)
	case r < o.ConditionFailed+o.UnknownApplied:
		if err := b.Batch.Apply(sync); err != nil {
			return err
		}
		if err := b.Batch.Wait(); err != nil {
			return err
		}
		b.s.Applied.Add(1)
		return fmt.Errorf("%w: injected after the batch was applied", engine.ErrUnknownOutcome)
	case r < o.ConditionFailed+o.UnknownApplied+o.UnknownLost:
		b.s.Lost.Add(1)
		return fmt.Errorf("%w: injected, nothing applied", engine.ErrUnknownOutcome)
	}
	return b.Batch.Apply(sync)
}
