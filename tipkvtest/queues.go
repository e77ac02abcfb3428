package tipkvtest

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// queueCases returns the queues tests: what a queue promises on every
// engine. Where the promise differs between an exclusive engine (leases in
// memory, a visibility watermark) and a shared one (leases in the store,
// sequence numbers assigned at commit, ClockSkew before a lapsed lease is
// taken over), the test says which it checks.
func queueCases() []testCase {
	return []testCase{
		{"FIFOReceiveAck", testQueueFIFOReceiveAck},
		{"Separate", testQueuesAreSeparate},
		{"BadInput", testQueueBadInput},
		{"AckErrors", testQueueAckErrors},
		{"AckInAbortedUpdateKeepsLease", testQueueAckInAbortedUpdate},
		{"LeaseExpiry", testQueueLeaseExpiry},
		{"LateAckBeforeRedelivery", testQueueLateAck},
		{"ReleaseAndExtend", testQueueReleaseAndExtend},
		{"PopAndPeek", testQueuePopAndPeek},
		{"EnqueueAt", testQueueEnqueueAt},
		{"EnqueueSeqs", testQueueEnqueueSeqs},
		{"EnqueueSeqsConcurrent", testQueueEnqueueSeqsConcurrent},
		{"ClockDrivesTime", testQueueClockDrivesTime},
		{"TimesOutOfRange", testQueueTimesOutOfRange},
		{"ReceiveWait", testQueueReceiveWait},
		{"ReceiveWaitClose", testQueueReceiveWaitClose},
		{"RetryBackoff", testQueueRetryBackoff},
		{"RetryCustomBackoff", testQueueRetryCustomBackoff},
		{"DeadLetterAfterMaxAttempts", testQueueDeadLetterAfterMaxAttempts},
		{"DeadLetterAfterLeaseExpiries", testQueueDeadLetterAfterLeaseExpiries},
		{"PopDeadLettersToo", testQueuePopDeadLettersToo},
		{"NoAttemptLimit", testQueueNoLimit},
		{"DiscardAndRequeueErrors", testQueueDiscardAndRequeueErrors},
		{"CorruptValue", testQueueCorruptValue},
		{"EnqueueOrderIsCommitOrder", testQueueCommitOrder},
		{"Restart", testQueueRestart},
		{"Headers", testQueueHeaders},
		{"Metadata", testQueueMetadata},
		{"ReopenCounts", testQueueReopenCounts},
		{"SeqNeverReused", testQueueSeqNeverReused},
		{"Names", testQueueNames},
		{"NamesErrors", testQueueNamesErrors},
		{"UseAfterClose", testQueueUseAfterClose},
		{"Model", testQueueModel},
		{"ModelGroups", testQueueModelGroups},
		// Shared engines pass over runs of messages behind their groups'
		// windows from 32 in a row; the model makes runs of a few.
		{"ModelGroupsShortRuns", withKnob(&knobs.Queue.BlockedRunMin, 2, testQueueModelGroupsShortRuns)},
		{"SharedPopNeverTwice", testQueueSharedPop},
		{"SharedLeaseNotStolen", testQueueSharedLease},
		{"SharedWaitWakes", testQueueSharedWait},
	}
}

// qJob is a message of the queue tests.
type qJob struct {
	Producer int `msgpack:"p"`
	N        int `msgpack:"n"`
}

// newQClock starts far from the wall clock, so that any reading of the
// wall clock shows.
func newQClock() *testutil.Clock {
	return testutil.NewClock(time.Date(2040, 1, 2, 3, 4, 5, 0, time.UTC))
}

// qOpenClocked opens a DB on a new store and a clock of its own.
func qOpenClocked(t *testing.T, b backend) (*tipkv.DB, *testutil.Clock) {
	t.Helper()
	clock := newQClock()
	return b.Open(t, &tipkv.Options{Clock: clock.Now}), clock
}

// qLapse is how long after a lease ended another delivery may take it:
// the engine's ClockSkew on a shared engine, nothing on an exclusive one.
func qLapse(t testing.TB, db *tipkv.DB) time.Duration {
	t.Helper()
	if c := Caps(t, db); c.Shared {
		return c.ClockSkew
	}
	return 0
}

// qShared reports whether db is on a shared engine.
func qShared(t testing.TB, db *tipkv.DB) bool {
	t.Helper()
	return Caps(t, db).Shared
}

func qOpen[T any](t testing.TB, db *tipkv.DB, name string, opts *queue.Options[T]) *queue.Queue[T] {
	t.Helper()
	q, err := queue.Open(db, name, opts)
	require.NoError(t, err)
	return q
}

func qValues[T any](ms []queue.Message[T]) []T {
	out := make([]T, len(ms))
	for i, m := range ms {
		out[i] = m.Value
	}
	return out
}

func qIDs[T any](ms []queue.Message[T]) []queue.ID {
	out := make([]queue.ID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func qDead[T any](t testing.TB, q *queue.Queue[T]) []queue.DeadLetter[T] {
	t.Helper()
	var out []queue.DeadLetter[T]
	for d, err := range q.DeadLetters() {
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

func qPeekAll[T any](t testing.TB, q *queue.Queue[T]) []queue.Message[T] {
	t.Helper()
	ms, err := q.Peek(1 << 30)
	require.NoError(t, err)
	return ms
}

// qChunk is how many messages the tests write in one batch: engines limit
// the writes of a batch (etcd: 128 by default), and a shared engine's Ack
// adds a condition per message.
const qChunk = 50

// qAck acks ids in batches of qChunk.
func qAck[T any](t testing.TB, db *tipkv.DB, q *queue.Queue[T], ids []queue.ID) {
	t.Helper()
	for len(ids) > 0 {
		n := min(len(ids), qChunk)
		require.NoError(t, q.Ack(db, ids[:n]...))
		ids = ids[n:]
	}
}

// qPush enqueues vals through w in one call and returns the first one's
// sequence number.
func qPush[T any](t testing.TB, w tipkv.Writer, q *queue.Queue[T], vals ...T) int64 {
	t.Helper()
	first, err := q.Enqueue(w, vals...)
	require.NoError(t, err)
	return first
}

// qEnqueue enqueues vals in batches of qChunk.
func qEnqueue[T any](t testing.TB, db *tipkv.DB, q *queue.Queue[T], vals []T) {
	t.Helper()
	for len(vals) > 0 {
		n := min(len(vals), qChunk)
		qPush(t, db, q, vals[:n]...)
		vals = vals[n:]
	}
}

// qReceive receives exactly n messages, in as many calls as the engine's
// batch limits take.
func qReceive[T any](t testing.TB, q *queue.Queue[T], n int, lease time.Duration) []queue.Message[T] {
	t.Helper()
	var out []queue.Message[T]
	for len(out) < n {
		ms, err := q.Receive(n-len(out), lease)
		require.NoError(t, err)
		require.NotEmpty(t, ms, "received %d of %d", len(out), n)
		out = append(out, ms...)
	}
	return out
}

// qDrain receives and acks everything visible, returning it in delivery
// order.
func qDrain[T any](t testing.TB, db *tipkv.DB, q *queue.Queue[T]) []queue.Message[T] {
	t.Helper()
	var out []queue.Message[T]
	for {
		ms, err := q.Receive(qChunk, time.Minute)
		require.NoError(t, err)
		if len(ms) == 0 {
			return out
		}
		qAck(t, db, q, qIDs(ms))
		out = append(out, ms...)
	}
}

// qItemKey is the key of message seq of queue name.
func qItemKey(name string, seq int64) []byte {
	return codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), name), seq)
}

func testQueueFIFOReceiveAck(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[string](t, db, "jobs", nil)
	qPush(t, db, q, "a", "b", "c")
	qPush(t, db, q, "d")
	require.Equal(t, 4, q.Len())

	ms, err := q.Receive(2, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, qValues(ms))
	require.Equal(t, int64(1), ms[0].Seq)
	require.Equal(t, 1, ms[0].Attempts)
	require.WithinDuration(t, time.Now(), ms[0].Enqueued, time.Minute)

	// Leased messages are not delivered again while the lease holds.
	ms2, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "d"}, qValues(ms2))
	ms3, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms3)

	require.NoError(t, q.Ack(db, qIDs(ms2)...))
	st, err := q.ReadStats()
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Head, "a and b are still leased")
	require.Equal(t, int64(5), st.Tail)
	require.Equal(t, 2, st.Len)
	require.Equal(t, 2, st.Leased)

	require.NoError(t, q.Ack(db, qIDs(ms)...))
	require.Equal(t, queue.Stats{Head: 5, Tail: 5}, q.Stats())
	Healthy(t, db)
}

func testQueuesAreSeparate(t *testing.T, b backend) {
	db := b.Open(t, nil)
	a := qOpen[string](t, db, "a", nil)
	a2 := qOpen[string](t, db, "a", nil)
	ab := qOpen[string](t, db, "a\x00b", nil)
	qPush(t, db, a, "1")
	qPush(t, db, ab, "2")
	require.Equal(t, 1, a2.Len(), "handles of one queue share it")
	ms, err := a2.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []string{"1"}, qValues(ms))
	ms, err = ab.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []string{"2"}, qValues(ms))
	Healthy(t, db)
}

func testQueueBadInput(t *testing.T, b backend) {
	db := b.Open(t, nil)
	_, err := queue.Open[string](db, "", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = queue.Open[string](db, strings.Repeat("x", queue.MaxNameSize+1), nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = queue.Open[string](nil, "q", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	q := qOpen(t, db, "q", &queue.Options[[]byte]{Codec: codec.Raw{}})
	_, err = q.Enqueue(db, []byte("ok"), make([]byte, queue.MaxValueSize+1))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorContains(t, err, "item 1")
	require.Zero(t, q.Len(), "a refused enqueue writes nothing")
	// The largest value: MaxValueSize, or on a shared engine whatever a
	// batch holds twice over (a delivery writes it and requires it).
	size := queue.MaxValueSize
	if c := Caps(t, db); c.Shared && c.MaxBatchBytes > 0 {
		size = min(size, c.MaxBatchBytes/4)
	}
	qPush(t, db, q, make([]byte, size))
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ms, 1, "the largest value is delivered")
	require.NoError(t, q.Ack(db, ms[0].ID))

	_, err = q.Receive(0, time.Second)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = q.Receive(1, 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = q.Pop(0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = q.Peek(-1)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	Healthy(t, db)
}

func testQueueAckErrors(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[int](t, db, "q", nil)
	qPush(t, db, q, 1, 2)
	ms, err := q.Receive(2, time.Minute)
	require.NoError(t, err)

	require.ErrorIs(t, q.Ack(db, queue.ID{}), tipkv.ErrInvalid, "zero ID")
	err = q.Ack(db, ms[0].ID, ms[0].ID)
	require.ErrorIs(t, err, tipkv.ErrInvalid, "an ID twice")
	forged, err := queue.ParseID("1.12345")
	require.NoError(t, err)
	err = q.Ack(db, forged)
	require.ErrorIs(t, err, queue.ErrLeaseLost)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, "message 1")

	// All or nothing: one bad ID acks nothing.
	require.ErrorIs(t, q.Ack(db, ms[0].ID, forged), queue.ErrLeaseLost)
	require.Equal(t, 2, q.Len())

	require.NoError(t, q.Ack(db, ms[0].ID))
	require.ErrorIs(t, q.Ack(db, ms[0].ID), queue.ErrLeaseLost, "acked twice")
	require.ErrorIs(t, q.Release(ms[0].ID, 0), queue.ErrLeaseLost)
	require.ErrorIs(t, q.Extend(ms[0].ID, time.Minute), queue.ErrLeaseLost)

	// A Batch of another DB is refused.
	other := b.Open(t, nil)
	err = other.Update(func(b *tipkv.Batch) error { return q.Ack(b, ms[1].ID) })
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.NoError(t, q.Ack(db, ms[1].ID))
	require.Zero(t, q.Len())
	Healthy(t, db)
}

func testQueueAckInAbortedUpdate(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[int](t, db, "q", nil)
	qPush(t, db, q, 1)
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	boom := errors.New("boom")
	err = db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, q.Ack(b, ms[0].ID))
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, q.Stats().Leased, "the lease goes on")
	require.NoError(t, q.Ack(db, ms[0].ID))
	require.Zero(t, q.Len())
	Healthy(t, db)
}

func testQueueLeaseExpiry(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	q := qOpen[string](t, db, "q", nil)
	qPush(t, db, q, "x", "y")
	const lease = 50 * time.Millisecond
	first, err := q.Receive(1, lease)
	require.NoError(t, err)
	require.Equal(t, "x", first[0].Value)
	require.Equal(t, 1, first[0].Attempts)

	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"y"}, qValues(ms), "y is next while x is leased")
	require.NoError(t, q.Ack(db, ms[0].ID))
	clock.Advance(lease + qLapse(t, db))
	again, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, "x", again[0].Value, "an expired lease redelivers")
	require.Equal(t, 2, again[0].Attempts)
	require.Equal(t, first[0].Seq, again[0].Seq)
	require.NotEqual(t, first[0].ID, again[0].ID)

	require.ErrorIs(t, q.Ack(db, first[0].ID), queue.ErrLeaseLost, "the old lease is gone")
	require.NoError(t, q.Ack(db, again[0].ID))
	require.Zero(t, q.Len())
	Healthy(t, db)
}

func testQueueLateAck(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	q := qOpen[string](t, db, "q", nil)
	qPush(t, db, q, "x")
	ms, err := q.Receive(1, time.Millisecond)
	require.NoError(t, err)
	clock.Advance(5 * time.Millisecond)
	require.NoError(t, q.Ack(db, ms[0].ID), "nobody received it since the lease ended")
	ms, err = q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms)
	Healthy(t, db)
}

func testQueueReleaseAndExtend(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	q := qOpen[string](t, db, "q", nil)
	qPush(t, db, q, "a", "b")
	ms, err := q.Receive(2, time.Minute)
	require.NoError(t, err)

	require.NoError(t, q.Release(ms[0].ID, 0))
	got, err := q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, qValues(got), "released at once")
	require.Equal(t, 2, got[0].Attempts)

	require.NoError(t, q.Release(got[0].ID, 80*time.Millisecond))
	require.Equal(t, 1, q.Stats().Delayed)
	got2, err := q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Empty(t, got2, "released with a delay")
	require.NoError(t, q.Extend(ms[1].ID, time.Hour))
	clock.Advance(80 * time.Millisecond)
	got2, err = q.Receive(5, 5*time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, qValues(got2))
	require.Equal(t, 3, got2[0].Attempts)

	// Extend keeps b past its first lease of a minute.
	clock.Advance(time.Minute + qLapse(t, db))
	got3, err := q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Empty(t, got3)
	require.ErrorIs(t, q.Extend(ms[1].ID, 0), tipkv.ErrInvalid)
	require.NoError(t, q.Ack(db, ms[1].ID, got2[0].ID))
	require.Zero(t, q.Len())
	Healthy(t, db)
}

func testQueuePopAndPeek(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[int](t, db, "q", nil)
	qPush(t, db, q, 1, 2, 3, 4, 5)
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)

	peek, err := q.Peek(3)
	require.NoError(t, err)
	require.Equal(t, []int{2, 3, 4}, qValues(peek), "1 is leased")
	require.True(t, peek[0].ID.IsZero())
	require.Equal(t, 0, peek[0].Attempts)

	popped, err := q.Pop(2)
	require.NoError(t, err)
	require.Equal(t, []int{2, 3}, qValues(popped))
	require.True(t, popped[0].ID.IsZero())
	require.Equal(t, 3, q.Len())

	require.NoError(t, q.Release(ms[0].ID, 0))
	peek, err = q.Peek(10)
	require.NoError(t, err)
	require.Equal(t, []int{1, 4, 5}, qValues(peek), "a released message comes first")
	require.Equal(t, 1, peek[0].Attempts)
	require.ErrorIs(t, q.Ack(db, peek[0].ID), tipkv.ErrInvalid)

	popped, err = q.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []int{1, 4, 5}, qValues(popped))
	require.Equal(t, queue.Stats{Head: 6, Tail: 6}, q.Stats())
	Healthy(t, db)
}

func testQueueEnqueueAt(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	q := qOpen[string](t, db, "q", nil)
	_, err := q.EnqueueAt(db, clock.Now().Add(100*time.Millisecond), "later")
	require.NoError(t, err)
	qPush(t, db, q, "now")
	ms, err := q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"now"}, qValues(ms))
	require.NoError(t, q.Ack(db, qIDs(ms)...))
	require.Equal(t, int64(1), q.Stats().Head, "the delayed message holds the head")
	require.Equal(t, 1, q.Stats().Delayed)

	ms, err = q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms)
	clock.Advance(100 * time.Millisecond)
	require.NoError(t, q.Wait(t.Context()), "visible by the clock: Wait returns at once")
	ms, err = q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"later"}, qValues(ms))
	require.NoError(t, q.Ack(db, qIDs(ms)...))
	require.Equal(t, queue.Stats{Head: 3, Tail: 3}, q.Stats())
	Healthy(t, db)
}

// Every time the queue reads or stores comes from Options.Clock: enqueue
// and dead-letter times, lease ends, delays, and what Receive, Peek and Pop
// see as now.
func testQueueClockDrivesTime(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	lapse := qLapse(t, db)
	q := qOpen(t, db, "q", &queue.Options[string]{MaxAttempts: 3})
	start := clock.Now()
	qPush(t, db, q, "a")
	_, err := q.EnqueueAt(db, start.Add(time.Hour), "later")
	require.NoError(t, err)

	ms, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, qValues(ms))
	require.True(t, ms[0].Enqueued.Equal(start), "enqueued at %v, want the clock's %v", ms[0].Enqueued, start)

	clock.Advance(59 * time.Second)
	ms2, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms2, "the lease holds until the clock passes its end")
	require.NoError(t, q.Extend(ms[0].ID, 2*time.Minute))
	clock.Advance(time.Minute + lapse)
	ms2, err = q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms2, "extended from the clock's now")
	clock.Advance(time.Minute + time.Second)
	ms2, err = q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, qValues(ms2), "the lapsed lease redelivers, without sleeping")
	require.Equal(t, 2, ms2[0].Attempts)

	require.NoError(t, q.Release(ms2[0].ID, 10*time.Minute))
	peek, err := q.Peek(10)
	require.NoError(t, err)
	require.Empty(t, peek, "released with a delay")
	clock.Advance(10 * time.Minute)
	peek, err = q.Peek(10)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, qValues(peek))

	clock.Advance(time.Hour)
	ms, err = q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "later"}, qValues(ms), "the delay of EnqueueAt is on the clock too")
	require.NoError(t, q.Release(ms[0].ID, 0))
	require.NoError(t, q.Ack(db, ms[1].ID))
	died := clock.Now()
	ms, err = q.Pop(10) // "a" was delivered 3 times: it dies
	require.NoError(t, err)
	require.Empty(t, ms)
	dead := qDead(t, q)
	require.Len(t, dead, 1)
	require.True(t, dead[0].Died.Equal(died), "died at %v, want the clock's %v", dead[0].Died, died)
	Healthy(t, db)
}

// Times a message's header cannot hold (Unix nanoseconds in an int64:
// 1970 to 2262) are refused at the call with ErrInvalid, and nothing
// changes.
func testQueueTimesOutOfRange(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	q := qOpen[string](t, db, "q", nil)
	far := time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC)
	forever := time.Duration(math.MaxInt64)

	_, err := q.EnqueueAt(db, far, "x")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = q.EnqueueAt(db, time.Unix(-1, 0), "x")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	err = db.Update(func(b *tipkv.Batch) error { _, err := q.EnqueueAt(b, far, "x"); return err })
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Zero(t, q.Len(), "nothing written")
	_, err = q.EnqueueAt(db, time.Time{}, "now")
	require.NoError(t, err, "the zero time is now")
	_, err = q.EnqueueAt(db, time.Unix(0, math.MaxInt64), "last")
	require.NoError(t, err, "the last time a header holds")
	require.Equal(t, 2, q.Len())

	_, err = q.Receive(1, forever)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	peek, err := q.Peek(10)
	require.NoError(t, err)
	require.Equal(t, []string{"now"}, qValues(peek))
	require.Zero(t, peek[0].Attempts, "the refused Receive counted nothing")

	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.ErrorIs(t, q.Release(ms[0].ID, forever), tipkv.ErrInvalid)
	require.ErrorIs(t, q.Extend(ms[0].ID, forever), tipkv.ErrInvalid)
	require.Equal(t, 1, q.Stats().Leased, "the lease goes on")
	delayed := 0 // on Pebble, only messages a read passed are known to be delayed
	if qShared(t, db) {
		delayed = 1 // the last message
	}
	require.Equal(t, delayed, q.Stats().Delayed)
	clock.Advance(2 * time.Minute)
	require.NoError(t, q.Ack(db, ms[0].ID), "the lease ended as it was")
	Healthy(t, db)
}

// ReceiveWait blocks until a message is visible and leases it, in one
// call.
func testQueueReceiveWait(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	q := qOpen[string](t, db, "q", nil)

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
	qPush(t, db, q, "a", "b")
	var ms []queue.Message[string]
	for len(ms) < 2 { // it may wake between the two
		r := <-got
		require.NoError(t, r.err)
		ms = append(ms, r.ms...)
		if len(ms) < 2 {
			go receive(t.Context())
		}
	}
	require.Equal(t, []string{"a", "b"}, qValues(ms))
	require.Equal(t, 2, q.Stats().Leased)

	// A lapsed lease, by the injected clock and Wake.
	go receive(t.Context())
	clock.Advance(time.Minute + qLapse(t, db))
	queue.Wake(db)
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, []string{"a", "b"}, qValues(r.ms))
	require.Equal(t, 2, r.ms[0].Attempts)
	require.NoError(t, q.Ack(db, qIDs(r.ms)...))

	// The context ends the wait, and leases nothing.
	ctx, cancel := context.WithCancel(t.Context())
	go receive(ctx)
	cancel()
	r = <-got
	require.ErrorIs(t, r.err, context.Canceled)
	require.Empty(t, r.ms)
	qPush(t, db, q, "c")
	ms, err := q.ReceiveWait(ctx, 10, time.Minute)
	require.ErrorIs(t, err, context.Canceled, "an ended context returns before receiving")
	require.Empty(t, ms)
	require.Zero(t, q.Stats().Leased)

	_, err = q.ReceiveWait(t.Context(), 0, time.Minute)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = q.ReceiveWait(t.Context(), 1, 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	Healthy(t, db)
}

func testQueueReceiveWaitClose(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[int](t, db, "q", nil)
	errc := make(chan error)
	go func() {
		_, err := q.ReceiveWait(context.Background(), 1, time.Minute)
		errc <- err
	}()
	require.NoError(t, db.Close())
	require.ErrorIs(t, <-errc, tipkv.ErrClosed)
	_, err := q.ReceiveWait(context.Background(), 1, time.Minute)
	require.ErrorIs(t, err, tipkv.ErrClosed)
}

// Retry releases a failed message after the backoff for its attempts:
// by default 1s, 2s, 4s, ... and at once when its next delivery would move
// it to the dead-letter queue.
func testQueueRetryBackoff(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	q := qOpen(t, db, "q", &queue.Options[string]{MaxAttempts: 4})
	qPush(t, db, q, "x")

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
	require.Len(t, qDead(t, q), 1)

	require.ErrorIs(t, q.Retry(queue.ID{}), tipkv.ErrInvalid)
	require.Equal(t, 5*time.Minute, queue.DefaultBackoff(100), "capped")
	require.Equal(t, time.Second, queue.DefaultBackoff(0))
	Healthy(t, db)
}

func testQueueRetryCustomBackoff(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	var mu sync.Mutex
	var asked []int
	q := qOpen(t, db, "q", &queue.Options[int]{Backoff: func(attempts int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, attempts)
		switch attempts {
		case 1:
			return -time.Second // at once
		case 2:
			return time.Duration(1<<63 - 1) // past 2262
		}
		return time.Minute
	}})
	qPush(t, db, q, 1)
	ms, err := q.Receive(1, time.Hour)
	require.NoError(t, err)
	require.NoError(t, q.Retry(ms[0].ID))
	ms, err = q.Receive(1, time.Hour)
	require.NoError(t, err)
	require.Len(t, ms, 1, "a backoff <= 0 releases at once")

	require.ErrorIs(t, q.Retry(ms[0].ID), tipkv.ErrInvalid)
	require.Equal(t, 1, q.Stats().Leased, "a refused retry keeps the lease")
	clock.Advance(time.Hour + qLapse(t, db))
	ms, err = q.Receive(1, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 3, ms[0].Attempts)
	require.NoError(t, q.Retry(ms[0].ID))
	require.Equal(t, 1, q.Stats().Delayed)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 2, 3}, asked)
	Healthy(t, db)
}

func testQueueDeadLetterAfterMaxAttempts(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen(t, db, "q", &queue.Options[string]{MaxAttempts: 2})
	qPush(t, db, q, "poison", "fine")

	for attempt := 1; attempt <= 2; attempt++ {
		ms, err := q.Receive(1, time.Minute)
		require.NoError(t, err)
		require.Equal(t, "poison", ms[0].Value)
		require.Equal(t, attempt, ms[0].Attempts)
		require.NoError(t, q.Release(ms[0].ID, 0))
	}
	// The third delivery would exceed MaxAttempts: the message moves to
	// the dead-letter queue in the same write, and the next one comes.
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"fine"}, qValues(ms))
	require.NoError(t, q.Ack(db, ms[0].ID))
	require.Equal(t, queue.Stats{Head: 3, Tail: 3, DeadLetters: 1}, q.Stats(), "the dead letter counted apart from Len")

	dead := qDead(t, q)
	require.Len(t, dead, 1)
	require.Equal(t, "poison", dead[0].Value)
	require.Equal(t, int64(1), dead[0].Seq)
	require.Equal(t, 2, dead[0].Attempts)
	require.WithinDuration(t, time.Now(), dead[0].Died, time.Minute)
	require.False(t, dead[0].Enqueued.After(dead[0].Died))

	// Requeue: back at the tail with a new number and a fresh count.
	require.NoError(t, q.Requeue(db, dead[0].Seq))
	require.Empty(t, qDead(t, q))
	require.Zero(t, q.Stats().DeadLetters)
	ms, err = q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "poison", ms[0].Value)
	require.Equal(t, int64(3), ms[0].Seq)
	require.Equal(t, 1, ms[0].Attempts)
	require.Equal(t, dead[0].Enqueued, ms[0].Enqueued)

	err = q.Requeue(db, dead[0].Seq)
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.ErrorContains(t, err, "dead letter 1")
	Healthy(t, db)
}

// Leases that end without an Ack count as deliveries: after MaxAttempts
// of them the message is a dead letter.
func testQueueDeadLetterAfterLeaseExpiries(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	q := qOpen(t, db, "q", &queue.Options[int]{MaxAttempts: 3})
	qPush(t, db, q, 7)
	for attempt := 1; attempt <= 3; attempt++ {
		ms, err := q.Receive(1, time.Millisecond)
		require.NoError(t, err)
		require.Len(t, ms, 1)
		require.Equal(t, attempt, ms[0].Attempts)
		clock.Advance(time.Millisecond + qLapse(t, db))
	}
	ms, err := q.Receive(1, time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, ms)
	require.Len(t, qDead(t, q), 1)
	require.Zero(t, q.Len())
	Healthy(t, db)
}

func testQueuePopDeadLettersToo(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen(t, db, "q", &queue.Options[int]{MaxAttempts: 1})
	qPush(t, db, q, 1, 2)
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, q.Release(ms[0].ID, 0))
	ms, err = q.Pop(5)
	require.NoError(t, err)
	require.Equal(t, []int{2}, qValues(ms))
	require.Len(t, qDead(t, q), 1)
	Healthy(t, db)
}

func testQueueNoLimit(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen(t, db, "q", &queue.Options[int]{MaxAttempts: -1})
	qPush(t, db, q, 1)
	for i := 1; i <= queue.DefaultMaxAttempts+2; i++ {
		ms, err := q.Receive(1, time.Minute)
		require.NoError(t, err)
		require.Equal(t, i, ms[0].Attempts)
		require.NoError(t, q.Release(ms[0].ID, 0))
	}
	require.Empty(t, qDead(t, q))
	Healthy(t, db)
}

func testQueueDiscardAndRequeueErrors(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen(t, db, "q", &queue.Options[int]{MaxAttempts: 1})
	qPush(t, db, q, 1, 2, 3)
	for range 2 {
		ms, err := q.Receive(3, time.Minute)
		require.NoError(t, err)
		for _, m := range ms {
			require.NoError(t, q.Release(m.ID, 0))
		}
	}
	dead := qDead(t, q)
	require.Len(t, dead, 3)

	require.ErrorIs(t, q.Requeue(db, 1, 1), tipkv.ErrInvalid)
	require.ErrorIs(t, q.Discard(db, 1, 99), tipkv.ErrNotFound)
	require.Len(t, qDead(t, q), 3, "a failed Discard deletes nothing")

	// Requeue in a batch that fails moves nothing.
	err := db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, q.Requeue(b, 2, 3))
		return tipkv.ErrConflict
	})
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.Len(t, qDead(t, q), 3)
	require.Zero(t, q.Len())

	require.NoError(t, q.Discard(db, 1))
	require.NoError(t, q.Requeue(db, 3, 2))
	require.Empty(t, qDead(t, q))
	ms, err := q.Pop(5)
	require.NoError(t, err)
	require.Equal(t, []int{3, 2}, qValues(ms), "requeued in the order given")
	Healthy(t, db)
}

// A stored value that does not decode moves to the dead-letter queue with
// an error naming its key; the queue keeps flowing.
func testQueueCorruptValue(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[int](t, db, "q", nil)
	qPush(t, db, q, 1, 2, 3)
	require.NoError(t, link.Write(db, func(tx *link.Tx) error {
		return tx.Batch.Set(qItemKey("q", 2), []byte{0x01, 0, 0, 0, 0xc1}) // a header, then a byte msgpack never uses
	}))
	require.NoError(t, link.Write(db, func(tx *link.Tx) error {
		return tx.Batch.Set(qItemKey("q", 3), []byte("no header"))
	}))

	_, err := q.Peek(5)
	require.ErrorIs(t, err, tipkv.ErrCorrupt)

	ms, err := q.Receive(5, time.Minute)
	require.ErrorIs(t, err, tipkv.ErrCorrupt)
	require.ErrorContains(t, err, "message 2")
	require.ErrorContains(t, err, "message 3")
	require.Equal(t, []int{1}, qValues(ms), "the good message is delivered")
	require.NoError(t, q.Ack(db, ms[0].ID))
	require.Zero(t, q.Len())

	var seqs []int64
	var errs []error
	for d, err := range q.DeadLetters() {
		seqs = append(seqs, d.Seq)
		errs = append(errs, err)
	}
	require.Equal(t, []int64{2}, seqs, "the first corrupt dead letter stops the listing")
	require.ErrorIs(t, errs[0], tipkv.ErrCorrupt)
	require.NoError(t, q.Discard(db, 2))
	var n int
	for d, err := range q.DeadLetters() {
		require.ErrorIs(t, err, tipkv.ErrCorrupt)
		require.Equal(t, int64(3), d.Seq)
		n++
	}
	require.Equal(t, 1, n)
	require.NoError(t, q.Discard(db, 3))
	require.Empty(t, qDead(t, q))
	Healthy(t, db)
}
