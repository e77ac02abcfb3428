package queue_test

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/queue"
)

func reopen(t *testing.T, db *tipkv.DB, dir string) *tipkv.DB {
	t.Helper()
	require.NoError(t, db.Close())
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// drain receives and acks everything visible, returning the values in
// delivery order.
func drain[T any](t *testing.T, db *tipkv.DB, q *queue.Queue[T]) []queue.Message[T] {
	t.Helper()
	var out []queue.Message[T]
	for {
		ms, err := q.Receive(1000, time.Minute)
		require.NoError(t, err)
		if len(ms) == 0 {
			return out
		}
		require.NoError(t, q.Ack(db, ids(ms)...))
		out = append(out, ms...)
	}
}

// Close with leases out, acks out of order, pops and a dead letter; after
// reopening, nothing acked comes back, nothing else is lost, leased
// messages come back with their attempts counted, and head and tail are
// right.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	q := openQ(t, db, "q", &queue.Options[int]{MaxAttempts: 2})
	const n = 2000
	for i := 0; i < n; i += 100 {
		chunk := make([]int, 100)
		for k := range chunk {
			chunk[k] = i + k
		}
		require.NoError(t, q.Enqueue(db, chunk...))
	}
	// 0..99 leased and kept; 100..999 acked (out of order: the later
	// half first); 1000..1009 popped; 1010 dead-lettered.
	kept, err := q.Receive(100, time.Hour)
	require.NoError(t, err)
	mid, err := q.Receive(900, time.Hour)
	require.NoError(t, err)
	require.NoError(t, q.Ack(db, ids(mid[450:])...))
	require.NoError(t, q.Ack(db, ids(mid[:450])...))
	popped, err := q.Pop(10)
	require.NoError(t, err)
	require.Equal(t, 1000, popped[0].Value)
	for range 2 {
		ms, err := q.Receive(1, time.Hour)
		require.NoError(t, err)
		require.Equal(t, 1010, ms[0].Value)
		require.NoError(t, q.Release(ms[0].ID, 0))
	}
	ms, err := q.Receive(1, time.Hour) // moves 1010 to the dead letters
	require.NoError(t, err)
	require.Equal(t, 1011, ms[0].Value)
	require.NoError(t, q.Release(ms[0].ID, 0))
	before := q.Stats()
	require.Equal(t, queue.Stats{Head: 1, Tail: n + 1, Len: n - 900 - 10 - 1, Leased: 100}, before)

	db = reopen(t, db, dir)
	q = openQ(t, db, "q", &queue.Options[int]{MaxAttempts: 2})
	require.Equal(t, queue.Stats{Head: 1, Tail: n + 1, Len: n - 900 - 10 - 1}, q.Stats())
	require.ErrorIs(t, q.Ack(db, kept[0].ID), queue.ErrLeaseLost, "leases do not survive a restart")

	got := drain(t, db, q)
	var vals []int
	for _, m := range got {
		vals = append(vals, m.Value)
		switch {
		case m.Value < 100:
			require.Equal(t, 2, m.Attempts, "leased before the restart")
		case m.Value == 1011:
			require.Equal(t, 2, m.Attempts)
		default:
			require.Equal(t, 1, m.Attempts)
		}
	}
	var want []int
	for i := range n {
		if i < 100 || i > 1010 {
			want = append(want, i)
		}
	}
	require.Equal(t, want, vals, "nothing lost, nothing acked comes back, FIFO")
	dead := deadLetters(t, q)
	require.Len(t, dead, 1)
	require.Equal(t, 1010, dead[0].Value)

	// The queue is empty now; a restart must not reuse sequence numbers.
	db = reopen(t, db, dir)
	q = openQ(t, db, "q", &queue.Options[int]{MaxAttempts: 2})
	require.Equal(t, queue.Stats{Head: n + 1, Tail: n + 1}, q.Stats())
	require.NoError(t, q.Enqueue(db, 7))
	ms, err = q.Pop(1)
	require.NoError(t, err)
	require.Equal(t, int64(n+1), ms[0].Seq)
	require.Len(t, deadLetters(t, q), 1)
}

// Producers and consumers run while the DB closes under them; after
// reopening, every message whose Enqueue returned nil is there unless its
// Ack returned nil, and head and tail are right.
func TestRestartMidStream(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	q := openQ(t, db, "q", &queue.Options[int]{MaxAttempts: -1})

	var mu sync.Mutex
	enqueued := map[int]bool{} // Enqueue returned nil
	acked := map[int]bool{}    // Ack returned nil
	var next atomic.Int64
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				vs := make([]int, 5)
				for i := range vs {
					vs[i] = int(next.Add(1))
				}
				err := q.Enqueue(db, vs...)
				if err != nil {
					assert.ErrorIs(t, err, tipkv.ErrClosed, "producer %d", p)
					return
				}
				mu.Lock()
				for _, v := range vs {
					enqueued[v] = true
				}
				mu.Unlock()
			}
		}()
	}
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for {
				ms, err := q.Receive(1+rng.IntN(20), time.Hour)
				if err == nil && len(ms) > 0 {
					// Ack a random subset, keep the rest leased.
					var ack []queue.ID
					var vs []int
					for _, m := range ms {
						if rng.IntN(4) > 0 {
							ack = append(ack, m.ID)
							vs = append(vs, m.Value)
						}
					}
					err = q.Ack(db, ack...)
					if err == nil {
						mu.Lock()
						for _, v := range vs {
							acked[v] = true
						}
						mu.Unlock()
					}
				}
				if err != nil {
					assert.ErrorIs(t, err, tipkv.ErrClosed, "consumer %d", c)
					return
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, db.Close())
	wg.Wait()
	require.NotEmpty(t, acked)

	db, err = tipkv.Open(dir, nil)
	require.NoError(t, err)
	defer db.Close()
	q = openQ(t, db, "q", &queue.Options[int]{MaxAttempts: -1})
	st := q.Stats()
	left := peekAll(t, q)
	require.Equal(t, len(left), st.Len)
	present := map[int]bool{}
	var seqs []int64
	for _, m := range left {
		require.False(t, acked[m.Value], "message %d was acked and came back", m.Value)
		present[m.Value] = true
		seqs = append(seqs, m.Seq)
	}
	for v := range enqueued {
		require.True(t, acked[v] || present[v], "message %d was lost", v)
	}
	require.True(t, slices.IsSorted(seqs))
	if len(left) > 0 {
		require.Equal(t, left[0].Seq, st.Head)
		require.Equal(t, left[len(left)-1].Seq+1, st.Tail)
	}
	// The state key is never ahead of the messages it describes.
	s, err := link.Store(db)
	require.NoError(t, err)
	v, err := s.Get(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "q"))
	require.NoError(t, err)
	require.Equal(t, byte(0x01), v[0])
	head, _ := binary.Uvarint(v[1:])
	require.LessOrEqual(t, int64(head), st.Head)
	t.Logf("%d enqueued, %d acked, %d left; stored head %d, %+v", len(enqueued), len(acked), len(left), head, st)
}

func peekAll[T any](t *testing.T, q *queue.Queue[T]) []queue.Message[T] {
	t.Helper()
	ms, err := q.Peek(1 << 30)
	require.NoError(t, err)
	return ms
}
