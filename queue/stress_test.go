package queue_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

var stressItems = flag.Int("queue.items", 100_000, "messages in TestProducersConsumers")

type delivery struct {
	seq      int64
	job      job
	attempts int
	acked    bool // this delivery's Ack succeeded
}

// 8 producers and 8 consumers move 100,000 messages through one queue.
// Producers enqueue in chunks, alone or inside Updates; consumers receive
// in batches, ack most messages, drop or release a few (which come back
// after their lease ends, or at once) and ack some inside Updates. Every
// message must be acked exactly once, every delivery after the first must
// follow one that was not acked, and each producer's messages keep their
// order.
func TestProducersConsumers(t *testing.T) {
	const producers, consumers = 8, 8
	total := *stressItems
	if testing.Short() {
		total = 10_000
	}
	perProducer := total / producers
	total = perProducer * producers
	seed := rand.Uint64()
	t.Logf("seed %d, %d messages", seed, total)

	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	q := openQ(t, db, "stress", &queue.Options[job]{MaxAttempts: -1})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, producers+consumers)

	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			for i := 0; i < perProducer; {
				n := min(1+rng.IntN(32), perProducer-i)
				chunk := make([]job, n)
				for k := range chunk {
					chunk[k] = job{Producer: p, N: i + k}
				}
				var err error
				if rng.IntN(2) == 0 {
					err = q.Enqueue(db, chunk...)
				} else {
					err = db.Update(func(b *tipkv.Batch) error { return q.Enqueue(b, chunk...) })
				}
				if err != nil {
					errs <- fmt.Errorf("producer %d: %w", p, err)
					return
				}
				i += n
			}
		}()
	}

	logs := make([][]delivery, consumers)
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(100+c)))
			var log []delivery
			defer func() { logs[c] = log }()
			for acked.Load() < int64(total) {
				ms, err := q.Receive(1+rng.IntN(64), 200*time.Millisecond)
				if err != nil {
					errs <- fmt.Errorf("consumer %d: receive: %w", c, err)
					return
				}
				if len(ms) == 0 {
					if err := q.Wait(ctx); err != nil {
						if ctx.Err() != nil && acked.Load() >= int64(total) {
							return
						}
						errs <- fmt.Errorf("consumer %d: wait: %w", c, err)
						return
					}
					continue
				}
				var ack []queue.ID
				var idx []int
				for _, m := range ms {
					log = append(log, delivery{seq: m.Seq, job: m.Value, attempts: m.Attempts})
					switch r := rng.IntN(1000); {
					case r == 0: // drop: the lease ends and the message comes back
					case r == 1:
						if err := q.Release(m.ID, 0); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
							errs <- fmt.Errorf("consumer %d: release: %w", c, err)
							return
						}
					default:
						ack = append(ack, m.ID)
						idx = append(idx, len(log)-1)
					}
				}
				ok, err := ackAll(db, q, ack, rng.IntN(2) == 0)
				if err != nil {
					errs <- fmt.Errorf("consumer %d: ack: %w", c, err)
					return
				}
				for k, i := range idx {
					if ok[k] {
						log[i].acked = true
						if acked.Add(1) == int64(total) {
							cancel() // wake the others
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Every message acked exactly once; redeliveries only after a
	// delivery that was not acked; attempts count deliveries.
	byJob := map[job][]delivery{}
	for _, log := range logs {
		for _, d := range log {
			byJob[d.job] = append(byJob[d.job], d)
		}
	}
	require.Len(t, byJob, total, "every message delivered")
	redelivered := 0
	seqOf := make([][]int64, producers)
	for p := range seqOf {
		seqOf[p] = make([]int64, perProducer)
	}
	for j, ds := range byJob {
		slices.SortFunc(ds, func(a, b delivery) int { return a.attempts - b.attempts })
		nacked := 0
		for k, d := range ds {
			require.Equal(t, k+1, d.attempts, "%v: deliveries are counted", j)
			require.Equal(t, ds[0].seq, d.seq)
			if d.acked {
				nacked++
				require.Equal(t, len(ds)-1, k, "%v: delivered again after a successful ack", j)
			}
		}
		require.Equal(t, 1, nacked, "%v: acked exactly once", j)
		redelivered += len(ds) - 1
		seqOf[j.Producer][j.N] = ds[0].seq
	}
	for p, ss := range seqOf {
		require.True(t, slices.IsSorted(ss), "producer %d: queue order follows enqueue order", p)
	}
	// Each consumer gets first deliveries in queue order.
	for c, log := range logs {
		var last int64
		for _, d := range log {
			if d.attempts == 1 {
				require.Greater(t, d.seq, last, "consumer %d", c)
				last = d.seq
			}
		}
	}
	st := q.Stats()
	require.Zero(t, st.Len)
	require.Equal(t, st.Tail, st.Head)
	t.Logf("%d redeliveries, final %+v", redelivered, st)
}

// ackAll acks ids, alone or in an Update. If some lease was lost it acks
// the others one by one. It reports which ids were acked.
func ackAll(db *tipkv.DB, q *queue.Queue[job], ids []queue.ID, inUpdate bool) ([]bool, error) {
	ok := make([]bool, len(ids))
	if len(ids) == 0 {
		return ok, nil
	}
	ack := func(ids ...queue.ID) error {
		if inUpdate {
			return db.Update(func(b *tipkv.Batch) error { return q.Ack(b, ids...) })
		}
		return q.Ack(db, ids...)
	}
	err := ack(ids...)
	if err == nil {
		for i := range ok {
			ok[i] = true
		}
		return ok, nil
	}
	if !errors.Is(err, queue.ErrLeaseLost) {
		return nil, err
	}
	for i, id := range ids {
		err := ack(id)
		if err != nil && !errors.Is(err, queue.ErrLeaseLost) {
			return nil, err
		}
		ok[i] = err == nil
	}
	return ok, nil
}

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
					if !assert.NoError(t, q.Enqueue(db, rng.IntN(100), rng.IntN(100))) {
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
