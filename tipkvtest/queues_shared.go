package tipkvtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// Queue tests with several processes on one store (the harness's Second): each
// handle stands for a process, with memory of its own.

// qHandles returns n DB handles on one new store, all on clock, or skips
// the test on an engine with no second handle.
func qHandles(t *testing.T, b backend, n int, clock *testutil.Clock) []*tipkv.DB {
	t.Helper()
	if b.Second == nil {
		t.Skip("the backend has no second handle (an exclusive engine)")
	}
	opts := &tipkv.Options{Clock: clock.Now}
	dbs := []*tipkv.DB{b.Open(t, opts)}
	for len(dbs) < n {
		dbs = append(dbs, b.Second(t, dbs[0], opts))
	}
	return dbs
}

// Three handles pop one queue while a fourth enqueues: no message is
// popped twice, none is lost.
func testQueueSharedPop(t *testing.T, b backend) {
	clock := newQClock()
	dbs := qHandles(t, b, 4, clock)
	n := b.N(1000)
	producer := qOpen[int](t, dbs[3], "pop", nil)
	half := make([]int, n/2)
	for i := range half {
		half[i] = i
	}
	qEnqueue(t, dbs[3], producer, half)
	var popped atomic.Int64
	var wg sync.WaitGroup
	got := make([][]int, 3)
	errs := make(chan error, 4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := n / 2; i < n; i += 10 {
			vals := make([]int, 0, 10)
			for v := i; v < min(i+10, n); v++ {
				vals = append(vals, v)
			}
			if _, err := producer.Enqueue(dbs[3], vals...); err != nil {
				errs <- err
				return
			}
		}
	}()
	for c := range 3 {
		q := qOpen[int](t, dbs[c], "pop", nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for popped.Load() < int64(n) {
				ms, err := q.Pop(1 + c*7)
				if err != nil {
					errs <- fmt.Errorf("popper %d: %w", c, err)
					return
				}
				for _, m := range ms {
					got[c] = append(got[c], m.Value)
				}
				popped.Add(int64(len(ms)))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var all []int
	for _, g := range got {
		require.True(t, slices.IsSorted(g), "each popper gets the queue's order")
		all = append(all, g...)
	}
	slices.Sort(all)
	require.Len(t, all, n, "nothing popped twice")
	for i, v := range all {
		require.Equal(t, i, v, "nothing lost")
	}
	require.Zero(t, producer.Len())
	Healthy(t, dbs[0])
}

// A lease held by A is never delivered to B before it ends (plus
// ClockSkew); then B takes it over, and A's late Ack, Release, Retry and
// Extend are ErrLeaseLost. A lease that lapsed but was not taken over is
// still A's.
func testQueueSharedLease(t *testing.T, b backend) {
	clock := newQClock()
	dbs := qHandles(t, b, 2, clock)
	lapse := qLapse(t, dbs[0])
	a := qOpen[string](t, dbs[0], "lease", nil)
	bq := qOpen[string](t, dbs[1], "lease", nil)
	qPush(t, dbs[0], a, "x", "y")
	const lease = time.Minute
	held, err := a.Receive(2, lease)
	require.NoError(t, err)
	require.Len(t, held, 2)

	start := clock.Now()
	points := []time.Duration{0, lease - 1}
	if lapse > 0 {
		points = append(points, lease, lease+lapse-1)
	}
	for _, at := range points {
		clock.Advance(start.Add(at).Sub(clock.Now()))
		ms, err := bq.Receive(10, lease)
		require.NoError(t, err)
		require.Empty(t, ms, "B received a message A holds, %v into a lease of %v", at, lease)
		ms, err = bq.Pop(10)
		require.NoError(t, err)
		require.Empty(t, ms, "B popped a message A holds")
		peek, err := bq.Peek(10)
		require.NoError(t, err)
		require.Empty(t, peek)
		require.Equal(t, 2, bq.Stats().Leased)
		require.ErrorIs(t, bq.Ack(dbs[1], held[0].ID), queue.ErrLeaseLost, "B cannot use A's IDs")
	}
	// Lapsed, not yet taken over: still A's.
	require.NoError(t, a.Extend(held[1].ID, lease))

	clock.Advance(1) // lease + lapse after the Receive
	taken, err := bq.Receive(10, lease)
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, qValues(taken), "taken over once the lease ended ClockSkew ago")
	require.Equal(t, 2, taken[0].Attempts)
	require.ErrorIs(t, a.Ack(dbs[0], held[0].ID), queue.ErrLeaseLost, "A's late ack")
	require.ErrorIs(t, a.Release(held[0].ID, 0), queue.ErrLeaseLost)
	require.ErrorIs(t, a.Retry(held[0].ID), queue.ErrLeaseLost)
	require.ErrorIs(t, a.Extend(held[0].ID, time.Hour), queue.ErrLeaseLost)
	err = dbs[0].Update(func(b *tipkv.Batch) error { return a.Ack(b, held[0].ID) })
	require.ErrorIs(t, err, queue.ErrLeaseLost, "inside an Update too")
	require.NoError(t, bq.Ack(dbs[1], taken[0].ID))

	require.NoError(t, a.Ack(dbs[0], held[1].ID), "the extended lease")
	require.Zero(t, a.Len())
	require.Zero(t, bq.Len())
	Healthy(t, dbs[0])
}

// B's Wait wakes after A's Enqueue, after A's Release of the only message
// (which writes the item, not the queue's state), and, after Wake, once a
// lease A holds has lapsed by the clock: whether the engine watches or B
// polls.
func testQueueSharedWait(t *testing.T, b backend) {
	clock := newQClock()
	dbs := qHandles(t, b, 2, clock)
	a := qOpen[int](t, dbs[0], "wait", nil)
	bq := qOpen[int](t, dbs[1], "wait", nil)
	wait := func() chan error {
		woke := make(chan error, 1)
		go func() { woke <- bq.Wait(t.Context()) }()
		return woke
	}
	// An empty queue: Wait blocks (the only bound is on how long it may
	// take to notice, never on how fast).
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	require.ErrorIs(t, bq.Wait(short), context.DeadlineExceeded)
	cancel()

	woke := wait()
	qPush(t, dbs[0], a, 1)
	require.NoError(t, <-woke, "after A's enqueue")

	ms, err := a.Receive(1, time.Hour)
	require.NoError(t, err)
	short, cancel = context.WithTimeout(t.Context(), 20*time.Millisecond)
	require.ErrorIs(t, bq.Wait(short), context.DeadlineExceeded, "A holds the only message")
	cancel()
	woke = wait()
	require.NoError(t, a.Release(ms[0].ID, 0))
	require.NoError(t, <-woke, "after A's release")

	ms, err = a.Receive(1, time.Hour)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	woke = wait()
	clock.Advance(time.Hour + qLapse(t, dbs[0]))
	queue.Wake(dbs[1])
	require.NoError(t, <-woke, "after the lease lapsed")
	got, err := bq.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 3, got[0].Attempts, "received, released, received, lapsed")
	Healthy(t, dbs[0])
}
