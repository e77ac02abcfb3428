package queue_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// An enqueue that commits after a later-numbered one is never skipped:
// nothing past the watermark is visible until every earlier enqueue has
// committed or failed.
func TestWatermark(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[string](t, db, "q", nil)
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- db.Update(func(b *tipkv.Batch) error {
			if err := q.Enqueue(b, "first"); err != nil {
				return err
			}
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	require.NoError(t, q.Enqueue(db, "second"))
	ms, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms, "second is committed but first, numbered before it, is not")
	peek, err := q.Peek(10)
	require.NoError(t, err)
	require.Empty(t, peek)
	require.Equal(t, 1, q.Len(), "Len counts committed messages")

	waitCtx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, q.Wait(waitCtx), context.DeadlineExceeded)

	close(release)
	require.NoError(t, <-done)
	require.NoError(t, q.Wait(t.Context()))
	ms, err = q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"first", "second"}, values(ms))
}

func TestAbortedEnqueueMovesWatermark(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[string](t, db, "q", nil)
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	boom := errors.New("boom")
	go func() {
		done <- db.Update(func(b *tipkv.Batch) error {
			if err := q.Enqueue(b, "never"); err != nil {
				return err
			}
			close(inside)
			<-release
			return boom
		})
	}()
	<-inside
	require.NoError(t, q.Enqueue(db, "kept"))
	close(release)
	require.ErrorIs(t, <-done, boom)
	ms, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"kept"}, values(ms))
	require.Equal(t, int64(2), ms[0].Seq)
	require.NoError(t, q.Ack(db, ms[0].ID))
	require.Equal(t, queue.Stats{Head: 3, Tail: 3}, q.Stats())
}

// A panic inside Update aborts the enqueue too.
func TestPanicInUpdateMovesWatermark(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[string](t, db, "q", nil)
	require.Panics(t, func() {
		_ = db.Update(func(b *tipkv.Batch) error {
			_ = q.Enqueue(b, "never")
			panic("boom")
		})
	})
	require.NoError(t, q.Enqueue(db, "kept"))
	ms, err := q.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []string{"kept"}, values(ms))
}

func TestWaitWakesOnEnqueue(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[int](t, db, "q", nil)
	woke := make(chan error)
	go func() { woke <- q.Wait(context.Background()) }()
	waitUntilWaiting(t, q, 1) // asleep on an empty queue
	require.NoError(t, q.Enqueue(db, 1))
	select {
	case err := <-woke:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not wake on a commit")
	}
	require.NoError(t, q.Wait(t.Context()), "a visible message: Wait returns at once")
}

// A lease that ends makes a message visible: Wait sleeps until then, on a
// timer, without polling.
func TestWaitWakesOnLeaseExpiry(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[int](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, 1))
	ms, err := q.Receive(1, 60*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	start := time.Now()
	require.NoError(t, q.Wait(t.Context()))
	require.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
	ms, err = q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, 2, ms[0].Attempts)
}

// A Wait that sleeps until a far deadline learns of an earlier one set
// later (here a release with a delay): the new earliest deadline wakes it
// to set its timer again.
func TestWaitLearnsOfEarlierDeadline(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[int](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, 1))
	ms, err := q.Receive(1, time.Hour)
	require.NoError(t, err)
	woke := make(chan error)
	go func() { woke <- q.Wait(context.Background()) }()
	waitUntilWaiting(t, q, 1) // Wait sleeps until the lease ends, in an hour
	require.NoError(t, q.Release(ms[0].ID, 50*time.Millisecond))
	select {
	case err := <-woke:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not wake when the released message became visible")
	}
}

func TestWaitContextAndClose(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
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
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before }, time.Second, time.Millisecond,
		"Wait leaves no goroutine behind")
}
