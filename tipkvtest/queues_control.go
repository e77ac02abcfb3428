package tipkvtest

import (
	"context"
	"errors"
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

// queueControlCases are the tests of a queue's control: Pause and Resume,
// and the cap of SetMaxInFlight. Each runs on every engine, with a second
// process (the harness's Second) where the engine has one.
func queueControlCases() []testCase {
	return []testCase{
		{"PauseDeliversNothing", testQueuePause},
		{"PauseSurvivesReopen", testQueuePauseReopen},
		{"PauseResumeWakesReceiveWait", testQueuePauseWakes},
		{"PauseInUpdateIsAtomic", testQueuePauseInUpdate},
		{"MaxInFlight", testQueueMaxInFlight},
		{"MaxInFlightManyConsumers", testQueueMaxInFlightConsumers},
		{"MaxInFlightAckWakes", testQueueMaxInFlightAckWakes},
	}
}

// qPair returns two DBs that reach one store: on a shared engine two
// processes (the harness's Second), each with memory of its own; on an
// exclusive one the same DB twice, whose queue handles share memory.
func qPair(t *testing.T, b backend, clock *testutil.Clock) (*tipkv.DB, *tipkv.DB) {
	t.Helper()
	opts := &tipkv.Options{Clock: clock.Now}
	db := b.Open(t, opts)
	if b.Second == nil {
		return db, db
	}
	return db, b.Second(t, db, opts)
}

// qReceiveNone requires that none of qs delivers anything now, by Receive
// or Pop, and that each says the queue is paused or at its cap.
func qReceiveNone[T any](t *testing.T, qs ...*queue.Queue[T]) {
	t.Helper()
	for i, q := range qs {
		ms, err := q.Receive(10, time.Minute)
		require.NoError(t, err)
		require.Empty(t, ms, "handle %d received", i)
	}
}

// A paused queue delivers nothing through any handle or process: Receive
// and Pop return nothing and no error, while Enqueue, Peek, Ack, Release,
// Extend, DeadLetters and Requeue go on, leased messages stay leased and
// a lapsed lease is not taken again. Resume, from the other process,
// delivers again.
func testQueuePause(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	a := qOpen[string](t, dbA, "p", nil)
	bq := qOpen[string](t, dbB, "p", nil)
	once := qOpen(t, dbA, "p", &queue.Options[string]{MaxAttempts: 1})

	// A dead letter, to requeue while paused.
	qPush(t, dbA, a, "dead")
	ms, err := once.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, once.Release(ms[0].ID, 0))
	qPush(t, dbA, a, "held", "released", "acked", "lapses")
	ms, err = once.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"held", "released", "acked", "lapses"}, qValues(ms))
	require.Len(t, qDead(t, a), 1)
	held, released, acked := ms[0].ID, ms[1].ID, ms[2].ID

	paused, err := bq.Paused()
	require.NoError(t, err)
	require.False(t, paused)
	require.NoError(t, a.Pause(dbA))
	require.NoError(t, a.Pause(dbA), "pausing a paused queue changes nothing")
	// bq last read the queue running: its first Receive finds the pause
	// at commit, if not before.
	qPush(t, dbB, bq, "new")
	qReceiveNone(t, bq, a)
	for _, q := range []*queue.Queue[string]{a, bq} {
		ms, err := q.Pop(10)
		require.NoError(t, err)
		require.Empty(t, ms)
		short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		require.ErrorIs(t, q.Wait(short), context.DeadlineExceeded, "Wait returned while paused")
		cancel()
		paused, err := q.Paused()
		require.NoError(t, err)
		require.True(t, paused)
		st, err := q.ReadStats()
		require.NoError(t, err)
		require.True(t, st.Paused)
		require.Equal(t, 4, st.Leased, "leases taken before the pause hold")
	}
	require.Equal(t, []string{"new"}, qValues(qPeekAll(t, bq)), "Peek reads on")

	// The rest goes on while paused.
	require.NoError(t, a.Ack(dbA, acked))
	require.NoError(t, a.Release(released, 0))
	require.NoError(t, a.Extend(held, time.Hour))
	require.NoError(t, bq.Requeue(dbB, qDead(t, bq)[0].Seq))
	require.Empty(t, qDead(t, a))
	clock.Advance(time.Minute + qLapse(t, dbA))
	queue.Wake(dbA)
	qReceiveNone(t, a, bq)
	require.ElementsMatch(t, []string{"released", "lapses", "new", "dead"}, qValues(qPeekAll(t, a)))
	require.Equal(t, 1, a.Stats().Leased, "the extended lease")

	require.NoError(t, bq.Resume(dbB))
	require.NoError(t, bq.Resume(dbB), "resuming a running queue changes nothing")
	for _, q := range []*queue.Queue[string]{a, bq} {
		paused, err := q.Paused()
		require.NoError(t, err)
		require.False(t, paused)
	}
	ms, err = a.Receive(10, time.Minute)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"released", "lapses", "new", "dead"}, qValues(ms))
	require.NoError(t, a.Ack(dbA, append(qIDs(ms), held)...))
	require.Zero(t, bq.Len())
	Healthy(t, dbA)
}

// The pause is stored: a reopened store is still paused, and a resume
// outlives the next reopen too.
func testQueuePauseReopen(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	db := b.Open(t, nil)
	q := qOpen[int](t, db, "p", nil)
	qPush(t, db, q, 1, 2)
	require.NoError(t, q.Pause(db))

	db = b.Reopen(t, db, nil)
	q = qOpen[int](t, db, "p", nil)
	st, err := q.ReadStats()
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, 2, st.Len)
	qReceiveNone(t, q)
	require.NoError(t, q.Resume(db))

	db = b.Reopen(t, db, nil)
	q = qOpen[int](t, db, "p", nil)
	paused, err := q.Paused()
	require.NoError(t, err)
	require.False(t, paused)
	ms, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, qValues(ms))
	require.NoError(t, q.Ack(db, qIDs(ms)...))
	Healthy(t, db)
}

// ReceiveWait sleeps through a pause, even while messages are visible and
// enqueues come in, and the Resume of another process wakes it (on a
// shared engine by the same wake-up an enqueue gives: nothing else writes
// the queue meanwhile).
func testQueuePauseWakes(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	a := qOpen[string](t, dbA, "p", nil)
	bq := qOpen[string](t, dbB, "p", nil)
	qPush(t, dbA, a, "x")
	require.NoError(t, a.Pause(dbA))

	type result struct {
		ms  []queue.Message[string]
		err error
	}
	got := make(chan result, 1)
	go func() {
		ms, err := a.ReceiveWait(t.Context(), 10, time.Minute)
		got <- result{ms, err}
	}()
	// An enqueue wakes the waiter, which finds the queue paused.
	qPush(t, dbB, bq, "y")
	select {
	case r := <-got:
		t.Fatalf("ReceiveWait returned while paused: %v %v", qValues(r.ms), r.err)
	case <-time.After(50 * time.Millisecond):
	}
	require.Len(t, qPeekAll(t, bq), 2, "nothing was leased")

	require.NoError(t, bq.Resume(dbB))
	r := <-got
	require.NoError(t, r.err)
	require.NotEmpty(t, r.ms)
	rest, err := a.Receive(10, time.Minute)
	require.NoError(t, err)
	ms := append(r.ms, rest...)
	require.ElementsMatch(t, []string{"x", "y"}, qValues(ms))
	require.NoError(t, a.Ack(dbA, qIDs(ms)...))
	Healthy(t, dbA)
}

// A Pause in an Update commits with the Update's other writes: a message
// enqueued with it is never delivered before a Resume, by a consumer that
// receives all along; an Update that fails pauses nothing.
func testQueuePauseInUpdate(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	a := qOpen[string](t, dbA, "p", nil)
	bq := qOpen[string](t, dbB, "p", nil)

	stop := make(chan struct{})
	seen := make(chan []string)
	started := make(chan struct{})
	go func() {
		var vals []string
		for i := 0; ; i++ {
			ms, err := bq.Receive(10, time.Minute)
			if err != nil {
				t.Error(err)
			}
			vals = append(vals, qValues(ms)...)
			if i == 0 {
				close(started)
			}
			select {
			case <-stop:
				seen <- vals
				return
			default:
			}
		}
	}()
	<-started
	require.NoError(t, dbA.Update(func(w *tipkv.Batch) error {
		if _, err := a.Enqueue(w, "x"); err != nil {
			return err
		}
		return a.Pause(w)
	}))
	qReceiveNone(t, a, bq)
	close(stop)
	require.Empty(t, <-seen, "delivered a message enqueued with the pause")

	boom := errors.New("boom")
	require.NoError(t, a.Resume(dbA))
	require.ErrorIs(t, dbA.Update(func(w *tipkv.Batch) error {
		if err := a.Pause(w); err != nil {
			return err
		}
		return boom
	}), boom)
	paused, err := bq.Paused()
	require.NoError(t, err)
	require.False(t, paused, "the failed Update paused the queue")
	require.NoError(t, dbA.Update(func(w *tipkv.Batch) error {
		if err := a.Pause(w); err != nil {
			return err
		}
		return a.Resume(w)
	}))
	ms, err := bq.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, qValues(ms))
	require.NoError(t, bq.Ack(dbB, qIDs(ms)...))
	Healthy(t, dbA)
}

// SetMaxInFlight caps the messages leased at once: a Receive gets only
// what fits, Ack, Release and a lapsed lease make room, Pop is not capped,
// Extend of a lapsed lease needs room, and the cap is stored.
func testQueueMaxInFlight(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	a := qOpen[int](t, dbA, "cap", nil)
	bq := qOpen[int](t, dbB, "cap", nil)
	require.ErrorIs(t, a.SetMaxInFlight(dbA, -1), tipkv.ErrInvalid)
	require.ErrorIs(t, a.SetMaxInFlight(dbA, queue.MaxInFlightLimit+1), tipkv.ErrInvalid)
	qPush(t, dbA, a, 1, 2, 3, 4, 5, 6, 7, 8)
	first, err := bq.Receive(1, time.Minute) // leased before the cap: it counts
	require.NoError(t, err)
	require.Len(t, first, 1)
	require.NoError(t, a.SetMaxInFlight(dbA, 3))
	st, err := bq.ReadStats()
	require.NoError(t, err)
	require.Equal(t, 3, st.MaxInFlight)

	ms, err := a.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Len(t, ms, 2, "room for two beside the first")
	qReceiveNone(t, a, bq)
	popped, err := bq.Pop(1)
	require.NoError(t, err)
	require.Len(t, popped, 1, "Pop leases nothing and is not capped")

	require.NoError(t, a.Ack(dbA, ms[0].ID))
	got, err := bq.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1, "an Ack made room for one")
	require.NoError(t, a.Release(ms[1].ID, 0))
	again, err := bq.Receive(5, time.Hour)
	require.NoError(t, err)
	require.Equal(t, []int{ms[1].Value}, qValues(again), "a Release made room for one: the released message, oldest")
	qReceiveNone(t, a, bq)

	// Leases that lapse make room; the leases of first and got lapse
	// (the one of again holds), and so two are received.
	clock.Advance(time.Minute + qLapse(t, dbA))
	queue.Wake(dbA)
	lapsed, err := a.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Len(t, lapsed, 2)
	require.NoError(t, a.Ack(dbA, qIDs(lapsed)...))

	// A lapsed lease needs room to be extended: with the cap lowered to
	// the one lease that holds (again's), there is none.
	late, err := a.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Len(t, late, 1)
	clock.Advance(time.Minute + qLapse(t, dbA))
	require.NoError(t, bq.SetMaxInFlight(dbB, 1))
	require.ErrorIs(t, a.Extend(late[0].ID, time.Minute), queue.ErrLeaseLost)
	qReceiveNone(t, a, bq)

	// Reopened, the cap holds.
	require.NoError(t, bq.Ack(dbB, again[0].ID))
	if b.Reopen != nil && b.Second == nil {
		dbA = b.Reopen(t, dbA, &tipkv.Options{Clock: clock.Now})
		a = qOpen[int](t, dbA, "cap", nil)
		require.Equal(t, 1, a.Stats().MaxInFlight)
		ms, err := a.Receive(5, time.Minute)
		require.NoError(t, err)
		require.Len(t, ms, 1)
		require.NoError(t, a.Ack(dbA, ms[0].ID))
	}
	require.NoError(t, a.SetMaxInFlight(dbA, 0))
	rest, err := a.Receive(10, time.Minute)
	require.NoError(t, err)
	require.NotEmpty(t, rest)
	require.NoError(t, a.Ack(dbA, qIDs(rest)...))
	require.Zero(t, a.Len())
	Healthy(t, dbA)
}

// Consumers on every handle receive and acknowledge under a cap: the
// messages held by consumers (counted from the Receive's return to just
// before the Ack) never pass the cap.
func testQueueMaxInFlightConsumers(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	const limit = 3
	n := max(b.N(120), 24)
	a := qOpen[qJob](t, dbA, "cap", nil)
	qFill(t, dbA, a, n)
	require.NoError(t, a.SetMaxInFlight(dbA, limit))

	var held, most, done atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		db := dbA
		if i%2 == 1 {
			db = dbB
		}
		q := qOpen[qJob](t, db, "cap", nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ms, err := q.ReceiveWait(ctx, 2, time.Hour)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				h := held.Add(int64(len(ms)))
				for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
				}
				time.Sleep(time.Millisecond) // hold them a while
				held.Add(-int64(len(ms)))
				if err := q.Ack(db, qIDs(ms)...); err != nil {
					errs <- err
					return
				}
				if done.Add(int64(len(ms))) == int64(n) {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, n, done.Load())
	require.LessOrEqual(t, most.Load(), int64(limit), "more messages held than the cap")
	require.Zero(t, a.Len())
	Healthy(t, dbA)
}

// A ReceiveWait held back by the cap, while messages are visible, wakes
// when an Ack of another process makes room.
func testQueueMaxInFlightAckWakes(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	a := qOpen[int](t, dbA, "cap", nil)
	bq := qOpen[int](t, dbB, "cap", nil)
	require.NoError(t, a.SetMaxInFlight(dbA, 1))
	qPush(t, dbA, a, 1, 2)
	ms, err := a.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int{1}, qValues(ms))

	got := make(chan []queue.Message[int], 1)
	go func() {
		ms, err := bq.ReceiveWait(t.Context(), 10, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- ms
	}()
	select {
	case ms := <-got:
		t.Fatalf("ReceiveWait returned at the cap: %v", qValues(ms))
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, a.Ack(dbA, ms[0].ID))
	ms = <-got
	require.Equal(t, []int{2}, qValues(ms))
	require.NoError(t, bq.Ack(dbB, ms[0].ID))
	require.True(t, slices.Equal([]int{}, qValues(qPeekAll(t, a))))
	Healthy(t, dbA)
}
