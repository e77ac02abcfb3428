package queue_test

import (
	"sync"
	"testing"
	"time"

	"github.com/tipkv/tipkv/queue"
)

// fakeClock is an Options.Clock that moves only when the test moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// newClock starts far from the wall clock, so that any reading of the
// wall clock shows.
func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2040, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// waitUntilWaiting waits, without a time limit, until n goroutines sleep
// in q's Wait (or ReceiveWait).
func waitUntilWaiting[T any](t *testing.T, q *queue.Queue[T], n int) {
	t.Helper()
	for queue.Waiting(q) != n {
		time.Sleep(100 * time.Microsecond) // progress, not a deadline
	}
}
