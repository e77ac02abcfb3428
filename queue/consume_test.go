package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// ReceiveWait blocks until a message is visible and leases it, in one
// call.
func TestReceiveWait(t *testing.T) {
	db, clock := openClocked(t)
	q := openQ[string](t, db, "q", nil)

	type result struct {
		ms  []queue.Message[string]
		err error
	}
	got := make(chan result)
	receive := func(ctx context.Context) {
		ms, err := q.ReceiveWait(ctx, 10, time.Minute)
		got <- result{ms, err}
	}

	go receive(t.Context())
	waitUntilWaiting(t, q, 1)
	require.NoError(t, q.Enqueue(db, "a", "b"))
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, []string{"a", "b"}, values(r.ms))
	require.Equal(t, 2, q.Stats().Leased)

	// A lapsed lease, by the injected clock and Wake.
	go receive(t.Context())
	waitUntilWaiting(t, q, 1)
	clock.Advance(time.Minute)
	queue.Wake(db)
	r = <-got
	require.NoError(t, r.err)
	require.Equal(t, []string{"a", "b"}, values(r.ms))
	require.Equal(t, 2, r.ms[0].Attempts)
	require.NoError(t, q.Ack(db, ids(r.ms)...))

	// The context ends the wait, and leases nothing.
	ctx, cancel := context.WithCancel(t.Context())
	go receive(ctx)
	waitUntilWaiting(t, q, 1)
	cancel()
	r = <-got
	require.ErrorIs(t, r.err, context.Canceled)
	require.Empty(t, r.ms)
	require.NoError(t, q.Enqueue(db, "c"))
	ms, err := q.ReceiveWait(ctx, 10, time.Minute)
	require.ErrorIs(t, err, context.Canceled, "an ended context returns before receiving")
	require.Empty(t, ms)
	require.Zero(t, q.Stats().Leased)

	_, err = q.ReceiveWait(t.Context(), 0, time.Minute)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = q.ReceiveWait(t.Context(), 1, 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

func TestReceiveWaitClose(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	q := openQ[int](t, db, "q", nil)
	errc := make(chan error)
	go func() {
		_, err := q.ReceiveWait(context.Background(), 1, time.Minute)
		errc <- err
	}()
	waitUntilWaiting(t, q, 1)
	require.NoError(t, db.Close())
	require.ErrorIs(t, <-errc, tipkv.ErrClosed)
	_, err = q.ReceiveWait(context.Background(), 1, time.Minute)
	require.ErrorIs(t, err, tipkv.ErrClosed)
}

// Retry releases a failed message after the backoff for its attempts:
// by default 1s, 2s, 4s, ... and at once when its next delivery would move
// it to the dead-letter queue.
func TestRetryBackoff(t *testing.T) {
	db, clock := openClocked(t)
	q := openQ(t, db, "q", &queue.Options[string]{MaxAttempts: 4})
	require.NoError(t, q.Enqueue(db, "x"))

	receive := func() []queue.Message[string] {
		t.Helper()
		ms, err := q.Receive(1, time.Hour)
		require.NoError(t, err)
		return ms
	}
	for attempt := 1; attempt <= 3; attempt++ {
		ms := receive()
		require.Len(t, ms, 1, "attempt %d", attempt)
		require.Equal(t, attempt, ms[0].Attempts)
		require.NoError(t, q.Retry(ms[0].ID))
		require.ErrorIs(t, q.Retry(ms[0].ID), queue.ErrLeaseLost)
		backoff := queue.DefaultBackoff(attempt)
		require.Equal(t, time.Second<<(attempt-1), backoff)
		clock.Advance(backoff - time.Millisecond)
		require.Empty(t, receive(), "attempt %d: hidden for the backoff", attempt)
		clock.Advance(time.Millisecond)
	}
	ms := receive()
	require.Equal(t, 4, ms[0].Attempts)
	require.NoError(t, q.Retry(ms[0].ID))
	require.Empty(t, receive(), "the fifth delivery moves it to the dead letters at once")
	require.Len(t, deadLetters(t, q), 1)

	require.ErrorIs(t, q.Retry(queue.ID{}), tipkv.ErrInvalid)
	require.Equal(t, 5*time.Minute, queue.DefaultBackoff(100), "capped")
	require.Equal(t, time.Second, queue.DefaultBackoff(0))
}

func TestRetryCustomBackoff(t *testing.T) {
	db, clock := openClocked(t)
	var asked []int
	q := openQ(t, db, "q", &queue.Options[int]{Backoff: func(attempts int) time.Duration {
		asked = append(asked, attempts)
		switch attempts {
		case 1:
			return -time.Second // at once
		case 2:
			return time.Duration(1<<63 - 1) // past 2262
		}
		return time.Minute
	}})
	require.NoError(t, q.Enqueue(db, 1))
	ms, err := q.Receive(1, time.Hour)
	require.NoError(t, err)
	require.NoError(t, q.Retry(ms[0].ID))
	ms, err = q.Receive(1, time.Hour)
	require.NoError(t, err)
	require.Len(t, ms, 1, "a backoff <= 0 releases at once")

	require.ErrorIs(t, q.Retry(ms[0].ID), tipkv.ErrInvalid)
	require.Equal(t, 1, q.Stats().Leased, "a refused retry keeps the lease")
	clock.Advance(time.Hour)
	ms, err = q.Receive(1, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 3, ms[0].Attempts)
	require.NoError(t, q.Retry(ms[0].ID))
	require.Equal(t, 1, q.Stats().Delayed)
	require.Equal(t, []int{1, 2, 3}, asked)
}
