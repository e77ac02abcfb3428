package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

type seen struct {
	Seq      int64
	Value    string
	State    queue.MessageState
	Until    time.Time
	Attempts int
}

func inspectAll(t *testing.T, q *queue.Queue[string], after int64, max int) []seen {
	t.Helper()
	ms, err := q.Inspect(after, max)
	require.NoError(t, err)
	out := make([]seen, len(ms))
	for i, m := range ms {
		require.True(t, m.ID.IsZero())
		out[i] = seen{m.Seq, m.Value, m.State, m.Until, m.Attempts}
		if !m.Until.IsZero() {
			out[i].Until = m.Until.UTC()
		}
	}
	return out
}

// Inspect shows every message of the queue, oldest first, with where it
// stands (ready, leased until the lease's end, delayed until its time),
// changes nothing (a Receive afterwards delivers as if it had not run),
// pages by sequence number, and forgets consumed messages and dead
// letters. In every mode.
func TestInspect(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		clock := newClock()
		db := m.open(t, 1, &tipkv.Options{Clock: clock.Now})[0]
		q := openQ[string](t, db, "jobs", &queue.Options[string]{MaxAttempts: 1})
		t0 := clock.Now().UTC()

		_, err := q.EnqueueWith(db, queue.EnqueueOptions{Headers: queue.Headers{"traceparent": "00-abc"}}, "a")
		require.NoError(t, err)
		push(t, db, q, "b", "c", "d")
		_, err = q.EnqueueAt(db, t0.Add(time.Hour), "later")
		require.NoError(t, err)
		require.Equal(t, []seen{
			{1, "a", queue.Ready, time.Time{}, 0},
			{2, "b", queue.Ready, time.Time{}, 0},
			{3, "c", queue.Ready, time.Time{}, 0},
			{4, "d", queue.Ready, time.Time{}, 0},
			{5, "later", queue.Delayed, t0.Add(time.Hour), 0},
		}, inspectAll(t, q, 0, 10))
		ms, err := q.Inspect(0, 1)
		require.NoError(t, err)
		require.Equal(t, queue.Headers{"traceparent": "00-abc"}, ms[0].Headers)
		require.Equal(t, t0, ms[0].Enqueued.UTC())

		got, err := q.Receive(3, time.Minute) // a, b, c
		require.NoError(t, err)
		require.Len(t, got, 3)
		require.NoError(t, q.Ack(db, got[0].ID))                 // a is gone
		require.NoError(t, q.Release(got[1].ID, 10*time.Minute)) // b is delayed
		require.Equal(t, []seen{
			{2, "b", queue.Delayed, t0.Add(10 * time.Minute), 1},
			{3, "c", queue.Leased, t0.Add(time.Minute), 1},
			{4, "d", queue.Ready, time.Time{}, 0},
			{5, "later", queue.Delayed, t0.Add(time.Hour), 0},
		}, inspectAll(t, q, 0, 10))

		// Pages: after the last Seq of one, the next.
		require.Equal(t, []int64{2, 3}, seqsOf(inspectAll(t, q, 0, 2)))
		require.Equal(t, []int64{4, 5}, seqsOf(inspectAll(t, q, 3, 2)))
		require.Empty(t, inspectAll(t, q, 5, 2))

		// Inspect changed nothing: d is the one visible message, with no
		// delivery counted.
		peek, err := q.Peek(10)
		require.NoError(t, err)
		require.Equal(t, []string{"d"}, values(peek))
		require.Zero(t, peek[0].Attempts)

		// Past the lease (and the shared engine's skew, none here), c is
		// ready again; Receive moves it to the dead letters
		// (MaxAttempts 1), and Inspect no longer shows it.
		clock.Advance(2 * time.Minute)
		queue.Wake(db)
		require.Equal(t, seen{3, "c", queue.Ready, time.Time{}, 1}, inspectAll(t, q, 2, 1)[0])
		got, err = q.Receive(10, time.Minute)
		require.NoError(t, err)
		require.Equal(t, []string{"d"}, values(got))
		require.Equal(t, []seen{
			{2, "b", queue.Delayed, t0.Add(10 * time.Minute), 1},
			{4, "d", queue.Leased, t0.Add(3 * time.Minute), 1},
			{5, "later", queue.Delayed, t0.Add(time.Hour), 0},
		}, inspectAll(t, q, 0, 10))
	})
}

func seqsOf(ss []seen) []int64 {
	out := make([]int64, len(ss))
	for i, s := range ss {
		out[i] = s.Seq
	}
	return out
}

// Inspect refuses max < 1, and fails with ErrClosed once the DB closed.
func TestInspectErrors(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		db := m.open(t, 1, nil)[0]
		q := openQ[string](t, db, "jobs", nil)
		push(t, db, q, "a")
		_, err := q.Inspect(0, 0)
		require.ErrorIs(t, err, tipkv.ErrInvalid)
		require.NoError(t, db.Close())
		_, err = q.Inspect(0, 1)
		require.ErrorIs(t, err, tipkv.ErrClosed)
	})
}

func TestMessageStateString(t *testing.T) {
	require.Equal(t, "ready", queue.Ready.String())
	require.Equal(t, "leased", queue.Leased.String())
	require.Equal(t, "delayed", queue.Delayed.String())
	require.Equal(t, "busy", queue.Busy.String())
	require.Equal(t, "MessageState(9)", queue.MessageState(9).String())
}
