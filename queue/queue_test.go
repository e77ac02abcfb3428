package queue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

type job struct {
	Producer int `msgpack:"p"`
	N        int `msgpack:"n"`
}

func openQ[T any](t testing.TB, db *tipkv.DB, name string, opts *queue.Options[T]) *queue.Queue[T] {
	t.Helper()
	q, err := queue.Open(db, name, opts)
	require.NoError(t, err)
	return q
}

func values[T any](ms []queue.Message[T]) []T {
	out := make([]T, len(ms))
	for i, m := range ms {
		out[i] = m.Value
	}
	return out
}

func ids[T any](ms []queue.Message[T]) []queue.ID {
	out := make([]queue.ID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestFIFOReceiveAck(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[string](t, db, "jobs", nil)
	require.NoError(t, q.Enqueue(db, "a", "b", "c"))
	require.NoError(t, q.Enqueue(db, "d"))
	require.Equal(t, 4, q.Len())

	ms, err := q.Receive(2, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, values(ms))
	require.Equal(t, int64(1), ms[0].Seq)
	require.Equal(t, 1, ms[0].Attempts)
	require.WithinDuration(t, time.Now(), ms[0].Enqueued, time.Minute)

	// Leased messages are not delivered again while the lease holds.
	ms2, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "d"}, values(ms2))
	ms3, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms3)

	require.NoError(t, q.Ack(db, ids(ms2)...))
	st := q.Stats()
	require.Equal(t, int64(1), st.Head, "a and b are still leased")
	require.Equal(t, int64(5), st.Tail)
	require.Equal(t, 2, st.Len)
	require.Equal(t, 2, st.Leased)

	require.NoError(t, q.Ack(db, ids(ms)...))
	st = q.Stats()
	require.Equal(t, queue.Stats{Head: 5, Tail: 5}, st)
}

func TestQueuesAreSeparate(t *testing.T) {
	db := testutil.OpenMem(t)
	a := openQ[string](t, db, "a", nil)
	a2 := openQ[string](t, db, "a", nil)
	ab := openQ[string](t, db, "a\x00b", nil)
	require.NoError(t, a.Enqueue(db, "1"))
	require.NoError(t, ab.Enqueue(db, "2"))
	require.Equal(t, 1, a2.Len(), "handles of one queue share its state")
	ms, err := a2.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []string{"1"}, values(ms))
	ms, err = ab.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []string{"2"}, values(ms))
}

func TestBadInput(t *testing.T) {
	db := testutil.OpenMem(t)
	_, err := queue.Open[string](db, "", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = queue.Open[string](db, strings.Repeat("x", queue.MaxNameSize+1), nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = queue.Open[string](nil, "q", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	q := openQ(t, db, "q", &queue.Options[[]byte]{Codec: codec.Raw{}})
	err = q.Enqueue(db, []byte("ok"), make([]byte, queue.MaxValueSize+1))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorContains(t, err, "item 1")
	require.Zero(t, q.Len(), "a refused enqueue writes nothing")
	require.NoError(t, q.Enqueue(db, make([]byte, queue.MaxValueSize)))

	_, err = q.Receive(0, time.Second)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = q.Receive(1, 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = q.Pop(0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = q.Peek(-1)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

func TestAckErrors(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[int](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, 1, 2))
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
	other := testutil.OpenMem(t)
	err = other.Update(func(b *tipkv.Batch) error { return q.Ack(b, ms[1].ID) })
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.NoError(t, q.Ack(db, ms[1].ID))
	require.Zero(t, q.Len())
}

func TestAckInAbortedUpdateKeepsLease(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[int](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, 1))
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
}

func TestLeaseExpiry(t *testing.T) {
	db, clock := openClocked(t)
	q := openQ[string](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, "x", "y"))
	const lease = 50 * time.Millisecond
	first, err := q.Receive(1, lease)
	require.NoError(t, err)
	require.Equal(t, "x", first[0].Value)
	require.Equal(t, 1, first[0].Attempts)

	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"y"}, values(ms), "y is next while x is leased")
	require.NoError(t, q.Ack(db, ms[0].ID))
	clock.Advance(lease)
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
}

func TestLateAckBeforeRedelivery(t *testing.T) {
	db, clock := openClocked(t)
	q := openQ[string](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, "x"))
	ms, err := q.Receive(1, time.Millisecond)
	require.NoError(t, err)
	clock.Advance(5 * time.Millisecond)
	require.NoError(t, q.Ack(db, ms[0].ID), "nobody received it since the lease ended")
	ms, err = q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms)
}

func TestReleaseAndExtend(t *testing.T) {
	db, clock := openClocked(t)
	q := openQ[string](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, "a", "b"))
	ms, err := q.Receive(2, time.Minute)
	require.NoError(t, err)

	require.NoError(t, q.Release(ms[0].ID, 0))
	got, err := q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, values(got), "released at once")
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
	require.Equal(t, []string{"a"}, values(got2))
	require.Equal(t, 3, got2[0].Attempts)

	// Extend keeps b past its first lease of a minute.
	clock.Advance(time.Minute)
	got3, err := q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Empty(t, got3)
	require.ErrorIs(t, q.Extend(ms[1].ID, 0), tipkv.ErrInvalid)
	require.NoError(t, q.Ack(db, ms[1].ID, got2[0].ID))
	require.Zero(t, q.Len())
}

func TestPopAndPeek(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[int](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, 1, 2, 3, 4, 5))
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)

	peek, err := q.Peek(3)
	require.NoError(t, err)
	require.Equal(t, []int{2, 3, 4}, values(peek), "1 is leased")
	require.True(t, peek[0].ID.IsZero())
	require.Equal(t, 0, peek[0].Attempts)

	popped, err := q.Pop(2)
	require.NoError(t, err)
	require.Equal(t, []int{2, 3}, values(popped))
	require.True(t, popped[0].ID.IsZero())
	require.Equal(t, 3, q.Len())

	require.NoError(t, q.Release(ms[0].ID, 0))
	peek, err = q.Peek(10)
	require.NoError(t, err)
	require.Equal(t, []int{1, 4, 5}, values(peek), "a released message comes first")
	require.Equal(t, 1, peek[0].Attempts)
	require.ErrorIs(t, q.Ack(db, peek[0].ID), tipkv.ErrInvalid)

	popped, err = q.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []int{1, 4, 5}, values(popped))
	require.Equal(t, queue.Stats{Head: 6, Tail: 6}, q.Stats())
}

func TestEnqueueAt(t *testing.T) {
	db, clock := openClocked(t)
	q := openQ[string](t, db, "q", nil)
	require.NoError(t, q.EnqueueAt(db, clock.Now().Add(100*time.Millisecond), "later"))
	require.NoError(t, q.Enqueue(db, "now"))
	ms, err := q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"now"}, values(ms))
	require.NoError(t, q.Ack(db, ids(ms)...))
	require.Equal(t, int64(1), q.Stats().Head, "the delayed message holds the head")

	ms, err = q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms)
	clock.Advance(100 * time.Millisecond)
	require.NoError(t, q.Wait(t.Context()), "visible by the clock: Wait returns at once")
	ms, err = q.Receive(5, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"later"}, values(ms))
	require.NoError(t, q.Ack(db, ids(ms)...))
	require.Equal(t, queue.Stats{Head: 3, Tail: 3}, q.Stats())
}

// The transactional outbox: a document write and its message commit
// together, or neither does.
func TestOutboxIsAtomic(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[string](t, db, "outbox", nil)
	s, err := link.Store(db)
	require.NoError(t, err)
	putDoc := func(b *tipkv.Batch, k string) error {
		return link.Write(b, func(tx *storage.Tx) error { return tx.Batch.Set([]byte("\x06"+k), []byte("v")) })
	}
	boom := errors.New("boom")
	err = db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, putDoc(b, "order-1"))
		require.NoError(t, q.Enqueue(b, "order-1 placed"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = s.Get([]byte("\x06order-1"))
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.Zero(t, q.Len())

	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		if err := putDoc(b, "order-2"); err != nil {
			return err
		}
		return q.Enqueue(b, "order-2 placed")
	}))
	_, err = s.Get([]byte("\x06order-2"))
	require.NoError(t, err)
	ms, err := q.Pop(10)
	require.NoError(t, err)
	require.Equal(t, []string{"order-2 placed"}, values(ms))
	require.Equal(t, int64(2), ms[0].Seq, "the aborted enqueue left a gap that nobody waits for")
}

func TestUseAfterClose(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	q := openQ[int](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, 1))
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.ErrorIs(t, q.Enqueue(db, 2), tipkv.ErrClosed)
	_, err = q.Receive(1, time.Minute)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = q.Pop(1)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = q.Peek(1)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	require.ErrorIs(t, q.Ack(db, ms[0].ID), tipkv.ErrClosed)
	require.ErrorIs(t, q.Release(ms[0].ID, 0), tipkv.ErrClosed)
	require.ErrorIs(t, q.Wait(t.Context()), tipkv.ErrClosed)
	_, err = queue.Open[int](db, "q", nil)
	require.ErrorIs(t, err, tipkv.ErrClosed)
}
