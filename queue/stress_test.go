package queue_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// Many goroutines hammer one queue with every operation while the in-memory
// model of who holds what stays consistent; run under -race.
func TestConcurrentMixedOps(t *testing.T) {
	db := testutil.OpenMem(t)
	q := openQ(t, db, "mixed", &queue.Options[int]{MaxAttempts: 3})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 300 {
				switch rng.IntN(6) {
				case 0:
					if _, err := q.Enqueue(db, rng.IntN(100), rng.IntN(100)); !assert.NoError(t, err) {
						return
					}
				case 1:
					if _, err := q.Pop(1 + rng.IntN(3)); !assert.NoError(t, err) {
						return
					}
				case 2:
					if _, err := q.Peek(5); !assert.NoError(t, err) {
						return
					}
				default:
					ms, err := q.Receive(1+rng.IntN(4), time.Duration(1+rng.IntN(5))*time.Millisecond)
					if !assert.NoError(t, err) {
						return
					}
					for _, m := range ms {
						switch rng.IntN(3) {
						case 0:
							err = q.Ack(db, m.ID)
						case 1:
							err = q.Release(m.ID, time.Duration(rng.IntN(3))*time.Millisecond)
						default:
							err = q.Extend(m.ID, time.Millisecond)
						}
						if err != nil && !assert.ErrorIs(t, err, queue.ErrLeaseLost) {
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	// Drain: everything left is delivered or dead-lettered.
	require.Eventually(t, func() bool {
		ms, err := q.Receive(100, time.Minute)
		require.NoError(t, err)
		if len(ms) > 0 {
			require.NoError(t, q.Ack(db, ids(ms)...))
		}
		return q.Len() == 0
	}, 10*time.Second, time.Millisecond)
	st := q.Stats()
	require.Equal(t, st.Tail, st.Head)
}
