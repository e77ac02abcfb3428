package testutil

import (
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Clock is an Options.Clock (or FeedOptions.Clock) that moves only when
// the test moves it. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, forwards or back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock d forwards (back if d < 0).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Collect reads seq to its end and returns its values, failing the test
// on an error.
func Collect[V any](t testing.TB, seq iter.Seq2[V, error]) []V {
	t.Helper()
	var out []V
	for v, err := range seq {
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

// ReadErr reads seq to its end and returns its error, failing the test if
// a pair came after the error.
func ReadErr[V any](t testing.TB, seq iter.Seq2[V, error]) error {
	t.Helper()
	var err error
	for _, e := range seq {
		require.NoError(t, err, "an error was not the last pair")
		err = e
	}
	return err
}

// Range returns from, from+1, ..., to, or from, from-1, ..., to when from
// > to: the versions or positions a read should return, in its order.
func Range(from, to int64) []int64 {
	var out []int64
	if from <= to {
		for v := from; v <= to; v++ {
			out = append(out, v)
		}
	} else {
		for v := from; v >= to; v-- {
			out = append(out, v)
		}
	}
	return out
}
