package queue_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// Wait's mechanics, in each mode: on a shared store the waiter is another
// handle (another process) than the writer, and these tests make sure it
// is asleep before the write, which the conformance tests cannot see.

// A panic inside Update aborts the enqueue too.
func TestPanicInUpdateMovesWatermark(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[string](t, db, "q", nil)
	require.Panics(t, func() {
		_ = db.Update(func(b *tipkv.Batch) error {
			_, _ = q.Enqueue(b, "never")
			panic("boom")
		})
	})
	push(t, db, q, "kept")
	ms, err := q.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []string{"kept"}, values(ms))
}

// waiterAndWriter returns the handles of the waiting and the writing side:
// one DB on Pebble, two handles on a shared store.
func waiterAndWriter(dbs []*tipkv.DB) (waiter, writer *tipkv.DB) {
	return dbs[len(dbs)-1], dbs[0]
}

func TestWaitWakesOnEnqueue(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		wdb, db := waiterAndWriter(m.open(t, 2, nil))
		w := openQ[int](t, wdb, "q", nil)
		q := openQ[int](t, db, "q", nil)
		woke := make(chan error)
		go func() { woke <- w.Wait(context.Background()) }()
		waitUntilWaiting(t, w, 1) // asleep on an empty queue
		push(t, db, q, 1)
		require.NoError(t, <-woke, "Wait wakes on a commit")
		require.NoError(t, w.Wait(t.Context()), "a visible message: Wait returns at once")
	})
}

// A lease that ends makes a message visible: Wait sleeps until then, on a
// timer (on a shared store, until ClockSkew later), without polling for it.
func TestWaitWakesOnLeaseExpiry(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		wdb, db := waiterAndWriter(m.open(t, 2, nil))
		w := openQ[int](t, wdb, "q", nil)
		q := openQ[int](t, db, "q", nil)
		push(t, db, q, 1)
		ms, err := q.Receive(1, 60*time.Millisecond)
		require.NoError(t, err)
		require.Len(t, ms, 1)
		start := time.Now()
		require.NoError(t, w.Wait(t.Context()))
		require.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
		ms, err = w.Receive(1, time.Minute)
		require.NoError(t, err)
		require.Len(t, ms, 1)
		require.Equal(t, 2, ms[0].Attempts)
	})
}

// A Wait that sleeps until a far deadline learns of an earlier one set
// later (here a release with a delay): the new earliest deadline wakes it
// to set its timer again.
func TestWaitLearnsOfEarlierDeadline(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		wdb, db := waiterAndWriter(m.open(t, 2, nil))
		w := openQ[int](t, wdb, "q", nil)
		q := openQ[int](t, db, "q", nil)
		push(t, db, q, 1)
		ms, err := q.Receive(1, time.Hour)
		require.NoError(t, err)
		woke := make(chan error)
		go func() { woke <- w.Wait(context.Background()) }()
		waitUntilWaiting(t, w, 1) // Wait sleeps until the lease ends, in an hour
		require.NoError(t, q.Release(ms[0].ID, 50*time.Millisecond))
		require.NoError(t, <-woke, "Wait wakes when the released message becomes visible")
	})
}

// Wait sleeps until the next lease ends by the clock; a test that moves
// an injected clock wakes it with queue.Wake, without sleeping.
func TestWaitWithInjectedClock(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		clock := newClock()
		wdb, db := waiterAndWriter(m.open(t, 2, &tipkv.Options{Clock: clock.Now}))
		w := openQ[int](t, wdb, "q", nil)
		q := openQ[int](t, db, "q", nil)
		push(t, db, q, 1)
		ms, err := q.Receive(1, time.Hour)
		require.NoError(t, err)

		woke := make(chan error)
		go func() { woke <- w.Wait(context.Background()) }()
		waitUntilWaiting(t, w, 1)
		queue.Wake(wdb) // the clock has not moved: Wait goes back to sleep
		waitUntilWaiting(t, w, 1)
		select {
		case err := <-woke:
			t.Fatalf("Wait returned %v before the lease ended", err)
		default:
		}
		clock.Advance(time.Hour)
		queue.Wake(wdb)
		require.NoError(t, <-woke)
		got, err := w.Receive(1, time.Hour)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, ms[0].Seq, got[0].Seq)
		require.Equal(t, 2, got[0].Attempts)
	})
}

func TestWaitContextAndClose(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		db := m.open(t, 1, nil)[0]
		q := openQ[int](t, db, "q", nil)
		before := runtime.NumGoroutine()

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i == 0 {
					errs <- q.Wait(ctx)
					return
				}
				errs <- q.Wait(context.Background())
			}()
		}
		waitUntilWaiting(t, q, 8)
		cancel()
		require.ErrorIs(t, <-errs, context.Canceled)
		require.NoError(t, db.Close())
		wg.Wait()
		close(errs)
		for err := range errs {
			require.ErrorIs(t, err, tipkv.ErrClosed)
		}
		require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before }, 5*time.Second, time.Millisecond,
			"Wait leaves no goroutine behind")
	})
}
