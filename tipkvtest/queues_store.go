package tipkvtest

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/queue"
)

// Queue tests about what the store holds: commit order, restarts, names,
// a closed DB.

// An enqueue that commits after a later one is never skipped, and an
// aborted one is never delivered. On Pebble, sequence numbers are taken at
// the call and a watermark hides later messages until the earlier commit
// has returned (an aborted enqueue leaves a gap). On a shared engine they
// are taken at commit: the later call commits first and gets the lower
// number, the Update that lost the race runs its function again (each
// run's Enqueue returns that run's number), and no number is skipped.
func testQueueCommitOrder(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[string](t, db, "q", nil)
	shared := qShared(t, db)
	inside, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var runs atomic.Int32
	var firsts []int64 // what each run's Enqueue returned
	done := make(chan error)
	go func() {
		done <- db.Update(func(b *tipkv.Batch) error {
			runs.Add(1)
			seq, err := q.Enqueue(b, "first")
			if err != nil {
				return err
			}
			firsts = append(firsts, seq)
			once.Do(func() { close(inside) })
			<-release
			return nil
		})
	}()
	<-inside
	second := qPush(t, db, q, "second")
	ms, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	if shared {
		require.Equal(t, []string{"second"}, qValues(ms), "committed first, numbered first")
		require.Equal(t, int64(1), ms[0].Seq)
		require.Equal(t, ms[0].Seq, second)
		require.NoError(t, q.Ack(db, ms[0].ID))
	} else {
		require.Empty(t, ms, "second is committed but first, numbered before it, is not")
		require.Empty(t, qPeekAll(t, q))
		require.Equal(t, 1, q.Len(), "Len counts committed messages")
	}
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, q.Wait(t.Context()))
	ms, err = q.Receive(10, time.Minute)
	require.NoError(t, err)
	if shared {
		require.Equal(t, []string{"first"}, qValues(ms))
		require.Equal(t, int64(2), ms[0].Seq)
		require.Equal(t, int32(2), runs.Load(), "the Update that lost the race ran again")
		require.Equal(t, []int64{1, 2}, firsts, "each run's Enqueue returns that run's number")
	} else {
		require.Equal(t, []string{"first", "second"}, qValues(ms))
		require.Equal(t, int32(1), runs.Load())
		require.Equal(t, []int64{1}, firsts)
		require.Equal(t, int64(2), second)
	}
	require.NoError(t, q.Ack(db, qIDs(ms)...))

	// An aborted enqueue is never delivered, and nobody waits for it.
	boom := errors.New("boom")
	err = db.Update(func(b *tipkv.Batch) error {
		qPush(t, b, q, "never")
		return boom
	})
	require.ErrorIs(t, err, boom)
	qPush(t, db, q, "kept")
	ms, err = q.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []string{"kept"}, qValues(ms))
	if shared {
		require.Equal(t, int64(3), ms[0].Seq, "numbers are taken at commit: no gap")
	} else {
		require.Equal(t, int64(4), ms[0].Seq, "the aborted enqueue left a gap")
	}
	st := q.Stats()
	require.Equal(t, queue.Stats{Head: ms[0].Seq + 1, Tail: ms[0].Seq + 1}, st)
	Healthy(t, db)
}

// Close with leases out, acks out of order, pops and a dead letter; after
// reopening, nothing acked comes back, nothing else is lost, leased
// messages come back with their attempts counted (on Pebble at once,
// leases being in memory; on a shared engine once their lease ends), and
// head and tail are right.
func testQueueRestart(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	clock := newQClock()
	opts := &tipkv.Options{Clock: clock.Now}
	db := b.Open(t, opts)
	shared := qShared(t, db)
	qopts := &queue.Options[int]{MaxAttempts: 2}
	q := qOpen(t, db, "q", qopts)
	k := b.N(100)
	n := 20*k + 20
	vals := make([]int, n)
	for i := range vals {
		vals[i] = i
	}
	qEnqueue(t, db, q, vals)
	// [0, k) leased and kept; [k, 10k) acked (out of order: the later
	// half first); 10k to 10k+9 popped; 10k+10 dead-lettered; 10k+11
	// released.
	kept := qReceive(t, q, k, time.Hour)
	mid := qReceive(t, q, 9*k, time.Hour)
	qAck(t, db, q, qIDs(mid[len(mid)/2:]))
	qAck(t, db, q, qIDs(mid[:len(mid)/2]))
	popped, err := q.Pop(10)
	require.NoError(t, err)
	require.Len(t, popped, 10)
	require.Equal(t, 10*k, popped[0].Value)
	dead := 10*k + 10
	for range 2 {
		ms, err := q.Receive(1, time.Hour)
		require.NoError(t, err)
		require.Equal(t, dead, ms[0].Value)
		require.NoError(t, q.Release(ms[0].ID, 0))
	}
	ms, err := q.Receive(1, time.Hour) // moves the dead one to the dead letters
	require.NoError(t, err)
	require.Equal(t, dead+1, ms[0].Value)
	require.NoError(t, q.Release(ms[0].ID, 0))
	left := n - 9*k - 10 - 1
	require.Equal(t, queue.Stats{Head: 1, Tail: int64(n + 1), Len: left, Leased: k, DeadLetters: 1}, q.Stats())

	db = b.Reopen(t, db, opts)
	q = qOpen(t, db, "q", qopts)
	leased := 0
	if shared {
		leased = k // leases live in the store
	}
	require.Equal(t, queue.Stats{Head: 1, Tail: int64(n + 1), Len: left, Leased: leased, DeadLetters: 1}, q.Stats())
	require.ErrorIs(t, q.Ack(db, kept[0].ID), queue.ErrLeaseLost, "a lease is not held by a new process")
	clock.Advance(time.Hour + qLapse(t, db)) // the leases from before end

	var got []int
	for _, m := range qDrain(t, db, q) {
		got = append(got, m.Value)
		switch {
		case m.Value < k:
			require.Equal(t, 2, m.Attempts, "leased before the restart")
		case m.Value == dead+1:
			require.Equal(t, 2, m.Attempts)
		default:
			require.Equal(t, 1, m.Attempts)
		}
	}
	slices.Sort(got) // the old leases come back after the first fresh messages on a shared engine
	var want []int
	for i := range n {
		if i < k || i > dead {
			want = append(want, i)
		}
	}
	require.Equal(t, want, got, "nothing lost, nothing acked comes back")
	deadLetters := qDead(t, q)
	require.Len(t, deadLetters, 1)
	require.Equal(t, dead, deadLetters[0].Value)

	// The queue is empty now; a restart must not reuse sequence numbers.
	db = b.Reopen(t, db, opts)
	q = qOpen(t, db, "q", qopts)
	require.Equal(t, queue.Stats{Head: int64(n + 1), Tail: int64(n + 1), DeadLetters: 1}, q.Stats())
	qPush(t, db, q, 7)
	ms, err = q.Pop(1)
	require.NoError(t, err)
	require.Equal(t, int64(n+1), ms[0].Seq)
	require.Len(t, qDead(t, q), 1)
	Healthy(t, db)
}

// An Ack inside an Update that commits after a later Pop must not make a
// restart reuse sequence numbers: a new message gets a number above every
// one delivered before (issue 16: it got 6 though 2-10 had been
// delivered, and a consumer that deduplicates by Seq dropped it).
func testQueueSeqNeverReused(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	db := b.Open(t, nil)
	q := qOpen[int](t, db, "q", nil)
	qPush(t, db, q, 1, 2, 3, 4, 5)
	first, err := q.Receive(1, time.Hour)
	require.NoError(t, err)

	inside, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	done := make(chan error)
	go func() {
		done <- db.Update(func(b *tipkv.Batch) error {
			if err := q.Ack(b, first[0].ID); err != nil {
				return err
			}
			once.Do(func() { close(inside) })
			<-release
			return nil
		})
	}()
	<-inside
	qPush(t, db, q, 6, 7, 8, 9, 10)
	popped, err := q.Pop(100)
	require.NoError(t, err)
	require.Equal(t, []int{2, 3, 4, 5, 6, 7, 8, 9, 10}, qValues(popped))
	close(release) // the Ack commits last
	require.NoError(t, <-done)

	db = b.Reopen(t, db, nil)
	q = qOpen[int](t, db, "q", nil)
	require.Equal(t, queue.Stats{Head: 11, Tail: 11}, q.Stats())
	qPush(t, db, q, 11)
	ms, err := q.Pop(1)
	require.NoError(t, err)
	require.Equal(t, int64(11), ms[0].Seq, "above every sequence number delivered before the restart")
	Healthy(t, db)
}

func qNames(t *testing.T, db *tipkv.DB) []string {
	t.Helper()
	var out []string
	for name, err := range queue.Names(db) {
		require.NoError(t, err)
		out = append(out, name)
	}
	return out
}

func testQueueNames(t *testing.T, b backend) {
	db := b.Open(t, nil)
	require.Empty(t, qNames(t, db))

	qOpen[int](t, db, "never written", nil)
	live := qOpen[int](t, db, "live", nil)
	qPush(t, db, live, 1, 2, 3)
	emptied := qOpen[int](t, db, "emptied", nil)
	qPush(t, db, emptied, 1)
	_, err := emptied.Pop(1)
	require.NoError(t, err)
	zero := qOpen[int](t, db, "a\x00b", nil)
	qPush(t, db, zero, 1)
	dead := qOpen(t, db, "dead", &queue.Options[int]{MaxAttempts: 1})
	qPush(t, db, dead, 1)
	ms, err := dead.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, dead.Release(ms[0].ID, 0))
	ms, err = dead.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms)
	require.Len(t, qDead(t, dead), 1)

	// Keys of one family each, written raw: a queue with only dead
	// letters, only a state key, only items; and keys of other families.
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	bt := s.NewBatch()
	key := func(f codec.Family, name string, seq int64) []byte {
		k := codec.AppendString(codec.AppendFamily(nil, f), name)
		if seq > 0 {
			k = codec.AppendAsc(k, seq)
		}
		return k
	}
	require.NoError(t, bt.Set(key(codec.FamilyDeadLetters, "only dead", 7), []byte("x")))
	require.NoError(t, bt.Set(key(codec.FamilyDeadLetters, "only dead", 9), []byte("x")))
	require.NoError(t, bt.Set(key(codec.FamilyQueueState, "only state", 0), []byte("x")))
	require.NoError(t, bt.Set(key(codec.FamilyQueueItems, "only items", 1), []byte("x")))
	require.NoError(t, bt.Set(key(codec.FamilyVersions, "not a queue", 1), []byte("x")))
	require.NoError(t, bt.Set(key(codec.FamilyFeed, "not a queue either", 1), []byte("x")))
	require.NoError(t, bt.Apply(false))
	require.NoError(t, bt.Close())

	want := []string{"a\x00b", "dead", "emptied", "live", "only dead", "only items", "only state"}
	require.Equal(t, want, qNames(t, db))
	require.True(t, slices.IsSorted(want))

	// Stopping early is fine.
	for name := range queue.Names(db) {
		require.Equal(t, "a\x00b", name)
		break
	}

	bt = s.NewBatch() // the raw keys are not valid values
	for _, k := range [][]byte{key(codec.FamilyDeadLetters, "only dead", 7), key(codec.FamilyDeadLetters, "only dead", 9),
		key(codec.FamilyQueueState, "only state", 0), key(codec.FamilyQueueItems, "only items", 1),
		key(codec.FamilyVersions, "not a queue", 1), key(codec.FamilyFeed, "not a queue either", 1)} {
		require.NoError(t, bt.Delete(k))
	}
	require.NoError(t, bt.Apply(false))
	require.NoError(t, bt.Close())
	Healthy(t, db)
}

func testQueueNamesErrors(t *testing.T, b backend) {
	for _, err := range queue.Names(nil) {
		require.ErrorIs(t, err, tipkv.ErrInvalid)
	}
	db := b.Open(t, nil)
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	bt := s.NewBatch()
	require.NoError(t, bt.Set(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "fine"), []byte("x")))
	require.NoError(t, bt.Set([]byte{byte(codec.FamilyQueueItems), 'x'}, []byte("x"))) // no terminator
	require.NoError(t, bt.Apply(false))
	require.NoError(t, bt.Close())
	var got []string
	var last error
	for name, err := range queue.Names(db) {
		if err != nil {
			last = err
			continue
		}
		got = append(got, name)
	}
	require.Equal(t, []string{"fine"}, got)
	require.ErrorIs(t, last, tipkv.ErrCorrupt)
	require.ErrorContains(t, last, "0278")

	require.NoError(t, db.Close())
	for _, err := range queue.Names(db) {
		require.ErrorIs(t, err, tipkv.ErrClosed)
	}
}

func testQueueUseAfterClose(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[int](t, db, "q", nil)
	qPush(t, db, q, 1)
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = q.Enqueue(db, 2)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = q.Receive(1, time.Minute)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = q.Pop(1)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = q.Peek(1)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	require.ErrorIs(t, q.Ack(db, ms[0].ID), tipkv.ErrClosed)
	require.ErrorIs(t, q.Release(ms[0].ID, 0), tipkv.ErrClosed)
	require.ErrorIs(t, q.Extend(ms[0].ID, time.Minute), tipkv.ErrClosed)
	require.ErrorIs(t, q.Wait(t.Context()), tipkv.ErrClosed)
	_, err = q.ReadStats()
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = queue.Open[int](db, "q", nil)
	require.ErrorIs(t, err, tipkv.ErrClosed)
}

// Headers ride along with a message through every path: Receive, a
// redelivery, Pop, Peek, the dead-letter queue and Requeue, and a restart.
// Messages without headers have none.
func testQueueHeaders(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen(t, db, "q", &queue.Options[string]{MaxAttempts: 1})
	trace := queue.Headers{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "vendor=x", "": "empty key"}
	_, err := q.EnqueueWith(db, queue.EnqueueOptions{Headers: trace}, "a", "b")
	require.NoError(t, err)
	qPush(t, db, q, "plain")
	require.NoError(t, db.Update(func(batch *tipkv.Batch) error {
		_, err := q.EnqueueWith(batch, queue.EnqueueOptions{Headers: queue.Headers{"k": "in an update"}}, "c")
		return err
	}))

	peeked := qPeekAll(t, q)
	require.Len(t, peeked, 4)
	require.Equal(t, trace, peeked[0].Headers)
	require.Equal(t, trace, peeked[1].Headers)
	require.Nil(t, peeked[2].Headers)
	require.Equal(t, queue.Headers{"k": "in an update"}, peeked[3].Headers)

	ms := qReceive(t, q, 1, time.Hour)
	require.Equal(t, "a", ms[0].Value)
	require.Equal(t, trace, ms[0].Headers)
	require.NoError(t, q.Ack(db, ms[0].ID))
	popped, err := q.Pop(1)
	require.NoError(t, err)
	require.Equal(t, trace, popped[0].Headers)

	// "plain" and "c" are delivered once, released, then dead: MaxAttempts 1.
	ms = qReceive(t, q, 2, time.Hour)
	require.Nil(t, ms[0].Headers)
	require.Equal(t, queue.Headers{"k": "in an update"}, ms[1].Headers)
	for _, m := range ms {
		require.NoError(t, q.Release(m.ID, 0))
	}
	got, err := q.Receive(10, time.Hour)
	require.NoError(t, err)
	require.Empty(t, got)
	dead := qDead(t, q)
	require.Len(t, dead, 2)
	require.Nil(t, dead[0].Headers)
	require.Equal(t, queue.Headers{"k": "in an update"}, dead[1].Headers)
	require.NoError(t, q.Requeue(db, dead[1].Seq))

	if b.Reopen != nil {
		db = b.Reopen(t, db, nil)
		q = qOpen(t, db, "q", &queue.Options[string]{MaxAttempts: 1})
	}
	ms = qReceive(t, q, 1, time.Hour)
	require.Equal(t, "c", ms[0].Value)
	require.Equal(t, queue.Headers{"k": "in an update"}, ms[0].Headers)
	require.Equal(t, 1, ms[0].Attempts)

	big := queue.Headers{"k": strings.Repeat("x", queue.MaxHeadersSize)}
	_, err = q.EnqueueWith(db, queue.EnqueueOptions{Headers: big}, "too big")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Equal(t, 1, q.Len(), "nothing written")
	Healthy(t, db)
}

// Metadata set on an Enqueue's writer (WithMetadata) or on its Update
// (Batch.SetMetadata) is stored with each message, beside its headers,
// and returned by every read: Peek, Inspect, Receive, Pop, a redelivery
// after Release, the dead letters, and a requeued message after a reopen.
func testQueueMetadata(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen(t, db, "q", &queue.Options[string]{MaxAttempts: 1})
	ada := tipkv.Metadata{Author: "ada", Reason: "signup", CorrelationID: "req-1", Headers: map[string]string{"tenant": "t1"}}
	job := tipkv.Metadata{Author: "job", CausationID: "evt-9"}
	qPush(t, tipkv.WithMetadata(db, ada), q, "a")
	_, err := q.EnqueueWith(tipkv.WithMetadata(db, ada), queue.EnqueueOptions{Headers: queue.Headers{"h": "v"}}, "b")
	require.NoError(t, err)
	qPush(t, db, q, "plain")
	require.NoError(t, db.Update(func(batch *tipkv.Batch) error {
		if err := batch.SetMetadata(job); err != nil {
			return err
		}
		if _, err := q.Enqueue(batch, "c"); err != nil {
			return err
		}
		_, err := q.Enqueue(tipkv.WithMetadata(batch, ada), "d") // its own
		return err
	}))
	want := map[string]*tipkv.Metadata{"a": &ada, "b": &ada, "plain": nil, "c": &job, "d": &ada}
	check := func(m queue.Message[string], what string) {
		t.Helper()
		got, err := m.Metadata()
		require.NoError(t, err, what)
		if w := want[m.Value]; w == nil {
			require.False(t, m.HasMetadata(), what)
			require.Equal(t, tipkv.Metadata{}, got, what)
		} else {
			require.True(t, m.HasMetadata(), "%s: %s", what, m.Value)
			require.Equal(t, *w, got, "%s: %s", what, m.Value)
		}
	}
	peeked := qPeekAll(t, q)
	require.Len(t, peeked, 5)
	for _, m := range peeked {
		check(m, "peek")
	}
	require.Equal(t, queue.Headers{"h": "v"}, peeked[1].Headers, "headers and metadata side by side")
	infos, err := q.Inspect(0, 10)
	require.NoError(t, err)
	require.Len(t, infos, 5)
	for _, in := range infos {
		check(in.Message, "inspect")
	}

	ms := qReceive(t, q, 1, time.Hour)
	check(ms[0], "receive")
	require.NoError(t, q.Ack(db, ms[0].ID))
	popped, err := q.Pop(1)
	require.NoError(t, err)
	check(popped[0], "pop")
	require.Equal(t, queue.Headers{"h": "v"}, popped[0].Headers)

	// "plain", "c" and "d": delivered once, released, then dead.
	ms = qReceive(t, q, 3, time.Hour)
	for _, m := range ms {
		check(m, "receive")
		require.NoError(t, q.Release(m.ID, 0))
	}
	got, err := q.Receive(10, time.Hour)
	require.NoError(t, err)
	require.Empty(t, got)
	dead := qDead(t, q)
	require.Len(t, dead, 3)
	for _, d := range dead {
		m, err := d.Metadata()
		require.NoError(t, err)
		if w := want[d.Value]; w != nil {
			require.Equal(t, *w, m, "dead letter %s", d.Value)
		} else {
			require.Equal(t, tipkv.Metadata{}, m, "dead letter %s", d.Value)
		}
	}
	require.NoError(t, q.Requeue(db, dead[1].Seq, dead[2].Seq))

	if b.Reopen != nil {
		db = b.Reopen(t, db, nil)
		q = qOpen(t, db, "q", &queue.Options[string]{MaxAttempts: 1})
	}
	ms = qReceive(t, q, 2, time.Hour)
	require.Equal(t, []string{"c", "d"}, qValues(ms))
	for _, m := range ms {
		check(m, "after a requeue")
	}
	Healthy(t, db)
}

// A queue reopened after many enqueues and consumes, some in flight when
// it closed, counts its messages right without walking them (the stored
// count), and a straggler leased and never acked at the head comes back
// first.
func testQueueReopenCounts(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	clock := newQClock()
	opts := &tipkv.Options{Clock: clock.Now}
	db := b.Open(t, opts)
	q := qOpen[int](t, db, "q", nil)
	n := b.N(3000)
	for i := 0; i < n; i += 7 {
		vals := make([]int, min(7, n-i))
		for k := range vals {
			vals[k] = i + k
		}
		qPush(t, db, q, vals...)
	}
	straggler := qReceive(t, q, 1, time.Hour)
	consumed := qReceive(t, q, n/2, time.Hour)
	qAck(t, db, q, qIDs(consumed))
	want := n - n/2
	require.Equal(t, want, q.Len())
	db = b.Reopen(t, db, opts)
	q = qOpen[int](t, db, "q", nil)
	require.Equal(t, want, q.Len())
	// On a shared engine the lease outlives the restart: let it end.
	clock.Advance(time.Hour + qLapse(t, db) + time.Second)
	ms := qReceive(t, q, 1, time.Hour)
	require.Equal(t, straggler[0].Value, ms[0].Value)
	require.Equal(t, 2, ms[0].Attempts)
	require.Equal(t, want, q.Len())
	Healthy(t, db)
}
