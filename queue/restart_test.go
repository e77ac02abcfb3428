package queue_test

import (
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
	"github.com/tipkv/tipkv/internal/queuefmt"
	"github.com/tipkv/tipkv/queue"
)

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
				_, err := q.Enqueue(db, vs...)
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
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	v, err := s.Get(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "q"))
	require.NoError(t, err)
	stored, err := queuefmt.ParseState(v)
	require.NoError(t, err)
	require.True(t, stored.Counted)
	head := stored.Head
	require.LessOrEqual(t, head, st.Head)
	// The stored count is exact below its end.
	below := 0
	for _, m := range left {
		if m.Seq < stored.CountTo {
			below++
		}
	}
	require.Equal(t, int64(below), stored.Count, "stored %+v", stored)
	t.Logf("%d enqueued, %d acked, %d left; stored %+v, %+v", len(enqueued), len(acked), len(left), stored, st)
}

func peekAll[T any](t *testing.T, q *queue.Queue[T]) []queue.Message[T] {
	t.Helper()
	ms, err := q.Peek(1 << 30)
	require.NoError(t, err)
	return ms
}
