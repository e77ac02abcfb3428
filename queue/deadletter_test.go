package queue_test

import (
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

func deadLetters[T any](t *testing.T, q *queue.Queue[T]) []queue.DeadLetter[T] {
	t.Helper()
	var out []queue.DeadLetter[T]
	for d, err := range q.DeadLetters() {
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

func TestDeadLetterAfterMaxAttempts(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ(t, db, "q", &queue.Options[string]{MaxAttempts: 2})
	require.NoError(t, q.Enqueue(db, "poison", "fine"))

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
	require.Equal(t, []string{"fine"}, values(ms))
	require.NoError(t, q.Ack(db, ms[0].ID))
	require.Equal(t, queue.Stats{Head: 3, Tail: 3}, q.Stats())

	dead := deadLetters(t, q)
	require.Len(t, dead, 1)
	require.Equal(t, "poison", dead[0].Value)
	require.Equal(t, int64(1), dead[0].Seq)
	require.Equal(t, 2, dead[0].Attempts)
	require.WithinDuration(t, time.Now(), dead[0].Died, time.Minute)
	require.False(t, dead[0].Enqueued.After(dead[0].Died))

	// Requeue: back at the tail with a new number and a fresh count.
	require.NoError(t, q.Requeue(db, dead[0].Seq))
	require.Empty(t, deadLetters(t, q))
	ms, err = q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "poison", ms[0].Value)
	require.Equal(t, int64(3), ms[0].Seq)
	require.Equal(t, 1, ms[0].Attempts)
	require.Equal(t, dead[0].Enqueued, ms[0].Enqueued)

	err = q.Requeue(db, dead[0].Seq)
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.ErrorContains(t, err, "dead letter 1")
}

func TestDeadLetterAfterLeaseExpiries(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ(t, db, "q", &queue.Options[int]{MaxAttempts: 3})
	require.NoError(t, q.Enqueue(db, 7))
	deliveries := 0
	require.Eventually(t, func() bool {
		ms, err := q.Receive(1, time.Millisecond)
		require.NoError(t, err)
		deliveries += len(ms)
		return len(deadLetters(t, q)) == 1
	}, 5*time.Second, 2*time.Millisecond)
	require.Equal(t, 3, deliveries)
	require.Zero(t, q.Len())
}

func TestPopDeadLettersToo(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ(t, db, "q", &queue.Options[int]{MaxAttempts: 1})
	require.NoError(t, q.Enqueue(db, 1, 2))
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, q.Release(ms[0].ID, 0))
	ms, err = q.Pop(5)
	require.NoError(t, err)
	require.Equal(t, []int{2}, values(ms))
	require.Len(t, deadLetters(t, q), 1)
}

func TestNoLimit(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ(t, db, "q", &queue.Options[int]{MaxAttempts: -1})
	require.NoError(t, q.Enqueue(db, 1))
	for i := 1; i <= queue.DefaultMaxAttempts+2; i++ {
		ms, err := q.Receive(1, time.Minute)
		require.NoError(t, err)
		require.Equal(t, i, ms[0].Attempts)
		require.NoError(t, q.Release(ms[0].ID, 0))
	}
	require.Empty(t, deadLetters(t, q))
}

func TestDiscardAndRequeueErrors(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ(t, db, "q", &queue.Options[int]{MaxAttempts: 1})
	require.NoError(t, q.Enqueue(db, 1, 2, 3))
	for range 2 {
		ms, err := q.Receive(3, time.Minute)
		require.NoError(t, err)
		for _, m := range ms {
			require.NoError(t, q.Release(m.ID, 0))
		}
	}
	dead := deadLetters(t, q)
	require.Len(t, dead, 3)

	require.ErrorIs(t, q.Requeue(db, 1, 1), tipkv.ErrInvalid)
	require.ErrorIs(t, q.Discard(db, 1, 99), tipkv.ErrNotFound)
	require.Len(t, deadLetters(t, q), 3, "a failed Discard deletes nothing")

	// Requeue in a batch that fails moves nothing.
	err := db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, q.Requeue(b, 2, 3))
		return tipkv.ErrConflict
	})
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.Len(t, deadLetters(t, q), 3)
	require.Zero(t, q.Len())

	require.NoError(t, q.Discard(db, 1))
	require.NoError(t, q.Requeue(db, 3, 2))
	require.Empty(t, deadLetters(t, q))
	ms, err := q.Pop(5)
	require.NoError(t, err)
	require.Equal(t, []int{3, 2}, values(ms), "requeued in the order given")
}

// A stored value that does not decode moves to the dead-letter queue with
// an error naming its key; the queue keeps flowing.
func TestCorruptValue(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ[int](t, db, "q", nil)
	require.NoError(t, q.Enqueue(db, 1, 2, 3))
	key := codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "q"), 2)
	require.NoError(t, link.Write(db, func(tx *storage.Tx) error {
		return tx.Batch.Set(key, []byte{0x01, 0, 0, 0, 0xc1}) // a header, then a byte msgpack never uses
	}))
	key3 := codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "q"), 3)
	require.NoError(t, link.Write(db, func(tx *storage.Tx) error {
		return tx.Batch.Set(key3, []byte("no header"))
	}))

	_, err := q.Peek(5)
	require.ErrorIs(t, err, tipkv.ErrCorrupt)

	ms, err := q.Receive(5, time.Minute)
	require.ErrorIs(t, err, tipkv.ErrCorrupt)
	require.ErrorContains(t, err, "message 2")
	require.ErrorContains(t, err, "message 3")
	require.Equal(t, []int{1}, values(ms), "the good message is delivered")
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
	require.Empty(t, deadLetters(t, q))
}
