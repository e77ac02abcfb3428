package queue_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
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

// openClocked opens an in-memory DB on a fake clock.
func openClocked(t *testing.T) (*tipkv.DB, *fakeClock) {
	t.Helper()
	clock := newClock()
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, Clock: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db, clock
}

// Every time the queue reads or stores comes from Options.Clock: enqueue
// and dead-letter times, lease ends, delays, and what Receive, Peek and Pop
// see as now.
func TestClockDrivesTime(t *testing.T) {
	db, clock := openClocked(t)
	q := openQ(t, db, "q", &queue.Options[string]{MaxAttempts: 3})
	start := clock.Now()
	require.NoError(t, q.Enqueue(db, "a"))
	require.NoError(t, q.EnqueueAt(db, start.Add(time.Hour), "later"))

	ms, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, values(ms))
	require.True(t, ms[0].Enqueued.Equal(start), "enqueued at %v, want the clock's %v", ms[0].Enqueued, start)

	clock.Advance(59 * time.Second)
	ms2, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms2, "the lease holds until the clock passes its end")
	require.NoError(t, q.Extend(ms[0].ID, 2*time.Minute))
	clock.Advance(time.Minute)
	ms2, err = q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms2, "extended from the clock's now")
	clock.Advance(time.Minute + time.Second)
	ms2, err = q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, values(ms2), "the lapsed lease redelivers, without sleeping")
	require.Equal(t, 2, ms2[0].Attempts)

	require.NoError(t, q.Release(ms2[0].ID, 10*time.Minute))
	peek, err := q.Peek(10)
	require.NoError(t, err)
	require.Empty(t, peek, "released with a delay")
	clock.Advance(10 * time.Minute)
	peek, err = q.Peek(10)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, values(peek))

	clock.Advance(time.Hour)
	ms, err = q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "later"}, values(ms), "the delay of EnqueueAt is on the clock too")
	require.NoError(t, q.Release(ms[0].ID, 0))
	require.NoError(t, q.Ack(db, ms[1].ID))
	died := clock.Now()
	ms, err = q.Pop(10) // "a" was delivered 3 times: it dies
	require.NoError(t, err)
	require.Empty(t, ms)
	dead := deadLetters(t, q)
	require.Len(t, dead, 1)
	require.True(t, dead[0].Died.Equal(died), "died at %v, want the clock's %v", dead[0].Died, died)
}

// Wait sleeps until the next lease ends by the clock; a test that moves
// an injected clock wakes it with queue.Wake, without sleeping.
func TestWaitWithInjectedClock(t *testing.T) {
	db, clock := openClocked(t)
	q := openQ[int](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, 1))
	ms, err := q.Receive(1, time.Hour)
	require.NoError(t, err)

	woke := make(chan error)
	go func() { woke <- q.Wait(context.Background()) }()
	waitUntilWaiting(t, q, 1)
	queue.Wake(db) // the clock has not moved: Wait goes back to sleep
	waitUntilWaiting(t, q, 1)
	select {
	case err := <-woke:
		t.Fatalf("Wait returned %v before the lease ended", err)
	default:
	}
	clock.Advance(time.Hour)
	queue.Wake(db)
	require.NoError(t, <-woke)
	got, err := q.Receive(1, time.Hour)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, ms[0].Seq, got[0].Seq)
	require.Equal(t, 2, got[0].Attempts)
}

// waitUntilWaiting waits, without a time limit, until n goroutines sleep
// in q's Wait (or ReceiveWait).
func waitUntilWaiting[T any](t *testing.T, q *queue.Queue[T], n int) {
	t.Helper()
	for queue.Waiting(q) != n {
		time.Sleep(100 * time.Microsecond) // progress, not a deadline
	}
}

// Times a message's header cannot hold (Unix nanoseconds in an int64:
// 1970 to 2262) are refused at the call with ErrInvalid, and nothing
// changes.
func TestTimesOutOfRange(t *testing.T) {
	db, clock := openClocked(t)
	q := openQ[string](t, db, "q", nil)
	far := time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC)
	forever := time.Duration(math.MaxInt64)

	require.ErrorIs(t, q.EnqueueAt(db, far, "x"), tipkv.ErrInvalid)
	require.ErrorIs(t, q.EnqueueAt(db, time.Unix(-1, 0), "x"), tipkv.ErrInvalid)
	err := db.Update(func(b *tipkv.Batch) error { return q.EnqueueAt(b, far, "x") })
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Zero(t, q.Len(), "nothing written")
	require.NoError(t, q.EnqueueAt(db, time.Time{}, "now"), "the zero time is now")
	require.NoError(t, q.EnqueueAt(db, time.Unix(0, math.MaxInt64), "last"), "the last time a header holds")
	require.Equal(t, 2, q.Len())

	_, err = q.Receive(1, forever)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	peek, err := q.Peek(10)
	require.NoError(t, err)
	require.Equal(t, []string{"now"}, values(peek))
	require.Zero(t, peek[0].Attempts, "the refused Receive counted nothing")

	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.ErrorIs(t, q.Release(ms[0].ID, forever), tipkv.ErrInvalid)
	require.ErrorIs(t, q.Extend(ms[0].ID, forever), tipkv.ErrInvalid)
	require.Equal(t, 1, q.Stats().Leased, "the lease goes on")
	require.Zero(t, q.Stats().Delayed)
	clock.Advance(2 * time.Minute)
	require.NoError(t, q.Ack(db, ms[0].ID), "the lease ended as it was")
}
