package tipkvtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// queueGroupCases are the tests of message groups (EnqueueOptions.Group,
// Options.GroupWindow): per-group order, the window, a poisoned group
// and fair share. Each runs on every engine, with a second process where
// the engine has one; the queue model runs them at random too
// (Queues/ModelGroups).
func queueGroupCases() []testCase {
	return []testCase{
		{"GroupsInOrder", checked(testQueueGroupsInOrder)},
		{"GroupWindow", checked(testQueueGroupWindow)},
		{"GroupPoisonedHead", checked(testQueueGroupPoisoned)},
		{"GroupFairShare", checked(testQueueGroupFairShare)},
		{"GroupInvalid", testQueueGroupInvalid},
	}
}

// qPushGroup enqueues vals in group g through w.
func qPushGroup[T any](t testing.TB, w tipkv.Writer, q *queue.Queue[T], g string, vals ...T) int64 {
	t.Helper()
	first, err := q.EnqueueWith(w, queue.EnqueueOptions{Group: g}, vals...)
	require.NoError(t, err)
	return first
}

// qReceiveValues receives up to n messages and returns them with their
// values.
func qReceiveValues(t testing.TB, q *queue.Queue[string], n int) ([]queue.Message[string], []string) {
	t.Helper()
	ms, err := q.Receive(n, time.Minute)
	require.NoError(t, err)
	return ms, qValues(ms)
}

// A group's messages are delivered one at a time, in order, whoever
// receives them: the next waits while the one before is leased, delayed
// by a Retry, or delivered again after its lease ended; other groups and
// messages without a group go on. Peek and Wait see only what Receive
// may deliver.
func testQueueGroupsInOrder(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	a := qOpen(t, dbA, "g", &queue.Options[string]{Backoff: func(int) time.Duration { return 10 * time.Second }})
	bq := qOpen[string](t, dbB, "g", nil)
	qPushGroup(t, dbA, a, "a", "a1")
	qPushGroup(t, dbA, a, "b", "b1")
	qPushGroup(t, dbA, a, "a", "a2", "a3")
	qPushGroup(t, dbB, bq, "b", "b2")
	qPush(t, dbB, bq, "u1")

	peeked, err := bq.Peek(10)
	require.NoError(t, err)
	require.Equal(t, []string{"a1", "b1", "u1"}, qValues(peeked), "Peek shows each group's first only")
	msA, vals := qReceiveValues(t, a, 10)
	require.Equal(t, []string{"a1", "b1", "u1"}, vals)
	require.Equal(t, []string{"a", "b", ""}, []string{msA[0].Group, msA[1].Group, msA[2].Group})
	_, vals = qReceiveValues(t, bq, 10)
	require.Empty(t, vals, "the other process receives a group's second while its first is leased")
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, bq.Wait(short), context.DeadlineExceeded, "Wait returned with nothing deliverable")

	require.NoError(t, a.Ack(dbA, msA[0].ID, msA[2].ID)) // a1, u1
	msB, vals := qReceiveValues(t, bq, 10)
	require.Equal(t, []string{"a2"}, vals, "a1's ack lets a2 out, and only a2")

	// b1 fails: retried 10 s later, it holds b2 back meanwhile.
	require.NoError(t, a.Retry(msA[1].ID))
	_, vals = qReceiveValues(t, a, 10)
	require.Empty(t, vals, "b2 delivered while b1 waits for its retry")
	clock.Advance(10*time.Second + qLapse(t, dbA))
	ms, vals := qReceiveValues(t, a, 10)
	require.Equal(t, []string{"b1"}, vals)
	require.Equal(t, 2, ms[0].Attempts)

	// a2's lease ended (and b1's): a2 again, not a3, and b1, not b2.
	clock.Advance(time.Minute + qLapse(t, dbA))
	ms2, vals := qReceiveValues(t, a, 10)
	require.Equal(t, []string{"b1", "a2"}, vals)
	require.Equal(t, 3, ms2[0].Attempts)
	require.ErrorIs(t, bq.Ack(dbB, msB[0].ID), queue.ErrLeaseLost, "a2 delivered again, and its ended lease acked")

	var rest []string
	require.NoError(t, a.Ack(dbA, qIDs(ms2)...))
	for range 10 {
		ms, err := bq.Receive(10, time.Minute)
		require.NoError(t, err)
		if len(ms) == 0 {
			break
		}
		rest = append(rest, qValues(ms)...)
		require.NoError(t, bq.Ack(dbB, qIDs(ms)...))
	}
	require.Equal(t, []string{"a3", "b2"}, rest)
	require.Equal(t, 0, bq.Len())
}

// With a window of 2, two of a group's messages are out at once: the two
// oldest still in the queue, whichever of them was acknowledged first.
// Another window for a queue open in the DB is refused.
func testQueueGroupWindow(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	opts := &queue.Options[string]{GroupWindow: 2}
	a := qOpen(t, dbA, "w", opts)
	bq := qOpen(t, dbB, "w", opts)
	qPushGroup(t, dbA, a, "g", "g1", "g2", "g3", "g4", "g5")
	ms, vals := qReceiveValues(t, a, 10)
	require.Equal(t, []string{"g1", "g2"}, vals)
	require.NoError(t, a.Ack(dbA, ms[1].ID)) // g2 first
	more, vals := qReceiveValues(t, bq, 10)
	require.Equal(t, []string{"g3"}, vals, "g1 and g3 are the window")
	require.NoError(t, a.Ack(dbA, ms[0].ID))
	last, vals := qReceiveValues(t, a, 10)
	require.Equal(t, []string{"g4"}, vals)
	require.NoError(t, bq.Ack(dbB, more[0].ID))
	require.NoError(t, a.Ack(dbA, last[0].ID))
	_, vals = qReceiveValues(t, bq, 10)
	require.Equal(t, []string{"g5"}, vals)

	_, err := queue.Open(dbA, "w", &queue.Options[string]{GroupWindow: 3})
	require.ErrorIs(t, err, tipkv.ErrInvalid, "a second window for an open queue")
	_, err = queue.Open(dbA, "w", &queue.Options[string]{GroupWindow: 2})
	require.NoError(t, err)
}

// A message that keeps failing holds its group until it moves to the
// dead letters; then the group goes on, and a Requeue puts it behind the
// group's others, group kept.
func testQueueGroupPoisoned(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	opts := &queue.Options[string]{MaxAttempts: 2}
	a := qOpen(t, dbA, "p", opts)
	bq := qOpen(t, dbB, "p", opts)
	qPushGroup(t, dbA, a, "p", "p1", "p2")
	qPushGroup(t, dbA, a, "q", "q1")

	ms, vals := qReceiveValues(t, a, 10)
	require.Equal(t, []string{"p1", "q1"}, vals)
	require.NoError(t, a.Ack(dbA, ms[1].ID))
	require.NoError(t, a.Release(ms[0].ID, 0))
	ms, vals = qReceiveValues(t, bq, 10)
	require.Equal(t, []string{"p1"}, vals, "p2 passed its group's failing first")
	require.NoError(t, bq.Release(ms[0].ID, 0))
	// p1 was delivered MaxAttempts times: the next Receives move it to
	// the dead letters and deliver p2 (the same Receive, or the next).
	var got []queue.Message[string]
	for i := 0; i < 3 && len(got) == 0; i++ {
		got, _ = qReceiveValues(t, a, 10)
	}
	require.Equal(t, []string{"p2"}, qValues(got))
	dead := qDead(t, a)
	require.Len(t, dead, 1)
	require.Equal(t, "p1", dead[0].Value)
	require.Equal(t, "p", dead[0].Group)

	require.NoError(t, a.Requeue(dbA, dead[0].Seq))
	_, vals = qReceiveValues(t, bq, 10)
	require.Empty(t, vals, "the requeued p1 passed p2, which is leased")
	require.NoError(t, a.Ack(dbA, got[0].ID))
	ms, vals = qReceiveValues(t, bq, 10)
	require.Equal(t, []string{"p1"}, vals)
	require.Equal(t, "p", ms[0].Group)
	require.Equal(t, 1, ms[0].Attempts, "a requeued message starts its attempts again")
}

// Fair share: a quiet group's message is delivered by the first Receive
// after it is enqueued, however many messages of another group wait in
// front of it (10,000 at full size), and so is every next one while that
// backlog stays.
func testQueueGroupFairShare(t *testing.T, b backend) {
	clock := newQClock()
	dbA, dbB := qPair(t, b, clock)
	a := qOpen[string](t, dbA, "fair", nil)
	bq := qOpen[string](t, dbB, "fair", nil)
	backlog := b.N(10000)
	vals := make([]string, backlog)
	for i := range vals {
		vals[i] = "busy"
	}
	for len(vals) > 0 {
		n := min(len(vals), qChunk)
		qPushGroup(t, dbA, a, "busy", vals[:n]...)
		vals = vals[n:]
	}
	for round := range 5 {
		qPushGroup(t, dbB, bq, "quiet", "quiet")
		q := []*queue.Queue[string]{a, bq}[round%2]
		db := []*tipkv.DB{dbA, dbB}[round%2]
		ms, got := qReceiveValues(t, q, 10)
		require.Contains(t, got, "quiet", "round %d: the quiet group waited behind the backlog", round)
		require.LessOrEqual(t, len(ms), 2, "round %d: one busy message at a time, and the quiet one", round)
		require.NoError(t, q.Ack(db, qIDs(ms)...))
	}
	require.Equal(t, backlog-5, a.Len())
}

// A group key over queue.MaxGroupSize and a window below 1 are
// tipkv.ErrInvalid, and nothing is written.
func testQueueGroupInvalid(t *testing.T, b backend) {
	db := b.Open(t, nil)
	_, err := queue.Open(db, "bad", &queue.Options[string]{GroupWindow: -1})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	q := qOpen[string](t, db, "bad", nil)
	_, err = q.EnqueueWith(db, queue.EnqueueOptions{Group: strings.Repeat("g", queue.MaxGroupSize+1)}, "x")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, _, err = q.EnqueueOnceWith(db, "k", tipkv.UntilDone(), queue.EnqueueOptions{Group: strings.Repeat("g", queue.MaxGroupSize+1)}, "x")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Equal(t, 0, q.Len())
	qPushGroup(t, db, q, strings.Repeat("g", queue.MaxGroupSize), "x")
	require.Equal(t, 1, q.Len())
}
