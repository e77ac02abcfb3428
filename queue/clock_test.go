package queue_test

import (
	"testing"
	"time"

	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// newClock starts far from the wall clock, so that any reading of the
// wall clock shows.
func newClock() *testutil.Clock {
	return testutil.NewClock(time.Date(2040, 1, 2, 3, 4, 5, 0, time.UTC))
}

// waitUntilWaiting waits, without a time limit, until n goroutines sleep
// in q's Wait (or ReceiveWait).
func waitUntilWaiting[T any](t *testing.T, q *queue.Queue[T], n int) {
	t.Helper()
	for queue.Waiting(q) != n {
		time.Sleep(100 * time.Microsecond) // progress, not a deadline
	}
}
