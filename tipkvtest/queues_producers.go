package tipkvtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// qDelivery is one delivery seen by a consumer.
type qDelivery struct {
	seq      int64
	job      qJob
	attempts int
	at       time.Time // by the test's clock, when Receive returned: no earlier than the delivery
	deadline time.Time // no later than its lease ends
	released time.Time // when it was released, if it was
	acked    bool      // its Ack succeeded
}

// Producers enqueue in chunks, alone or inside Updates; consumers receive
// in batches, ack most messages (together, alone or inside Updates),
// release some and drop a few (whose leases then lapse as the clock
// moves). On an exclusive engine, 8 producers and 8 consumers share one
// handle and move 100,000 messages (10,000 with -short); on a shared one,
// 2 producer and 2 consumer handles move 2,000 (both divided by Scale).
// At the end: every message acked exactly once; a redelivery only after a
// delivery that was not acked, and never before that delivery's lease
// ended (plus ClockSkew) unless it was released; attempts count
// deliveries; each producer's messages in its order; sequence numbers
// dense; the queue empty. On an exclusive engine, each consumer also gets
// its first deliveries in queue order.
func testQueueProducersConsumers(t *testing.T, b backend) {
	clock := newQClock()
	producers, consumers, perProducer := 2, 2, b.N(1000)
	maxChunk, maxReceive := 8, 8
	var dbs []*tipkv.DB
	if b.Second != nil {
		dbs = qHandles(t, b, producers+consumers, clock)
	} else {
		dbs = []*tipkv.DB{b.Open(t, &tipkv.Options{Clock: clock.Now, NoSync: true})}
		producers, consumers, maxChunk, maxReceive = 8, 8, 32, 64
		total := 100_000
		if testing.Short() {
			total = 10_000
		}
		perProducer = b.N(total) / producers
	}
	handle := func(i int) *tipkv.DB { return dbs[i%len(dbs)] }
	shared := qShared(t, dbs[0])
	lapse := qLapse(t, dbs[0])
	total := producers * perProducer
	seed := rand.Uint64()
	t.Logf("seed %d, %d messages", seed, total)
	qopts := &queue.Options[qJob]{MaxAttempts: -1}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, producers+consumers)

	for p := range producers {
		db := handle(p)
		q := qOpen(t, db, "pc", qopts)
		spawn(&wg, func() {
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			for i := 0; i < perProducer; {
				n := min(1+rng.IntN(maxChunk), perProducer-i)
				chunk := make([]qJob, n)
				for k := range chunk {
					chunk[k] = qJob{Producer: p, N: i + k}
				}
				var err error
				if rng.IntN(2) == 0 {
					_, err = q.Enqueue(db, chunk...)
				} else {
					err = db.Update(func(b *tipkv.Batch) error { _, err := q.Enqueue(b, chunk...); return err })
				}
				if err != nil {
					errs <- fmt.Errorf("producer %d: %w", p, err)
					return
				}
				i += n
			}
		})
	}

	const lease = time.Minute
	logs := make([][]qDelivery, consumers)
	for c := range consumers {
		db := handle(producers + c)
		q := qOpen(t, db, "pc", qopts)
		spawn(&wg, func() {
			rng := rand.New(rand.NewPCG(seed, uint64(100+c)))
			var log []qDelivery
			defer func() { logs[c] = log }()
			for acked.Load() < int64(total) {
				before := clock.Now() // the lease ends no sooner than lease after this
				ms, err := q.Receive(1+rng.IntN(maxReceive), lease)
				if err != nil {
					errs <- fmt.Errorf("consumer %d: receive: %w", c, err)
					return
				}
				// Time goes on: dropped leases lapse (and others, whose
				// late acks fail), a twentieth of a lease per round.
				clock.Advance(lease / 20)
				if len(ms) == 0 {
					// Nothing visible; a wait returns as soon as something
					// is, but a producer may be done already.
					waitCtx, stop := context.WithTimeout(ctx, time.Millisecond)
					err := q.Wait(waitCtx)
					stop()
					if err != nil && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
						errs <- fmt.Errorf("consumer %d: wait: %w", c, err)
						return
					}
					continue
				}
				now := clock.Now() // the delivery was no later than this
				var ack []queue.ID
				var idx []int
				for _, m := range ms {
					d := qDelivery{seq: m.Seq, job: m.Value, attempts: m.Attempts, at: now, deadline: before.Add(lease)}
					switch r := rng.IntN(100); {
					case r < 2: // drop: the lease lapses and the message comes back
					case r < 8:
						d.released = clock.Now()
						if err := q.Release(m.ID, 0); err != nil {
							if !errors.Is(err, queue.ErrLeaseLost) {
								errs <- fmt.Errorf("consumer %d: release: %w", c, err)
								return
							}
							d.released = time.Time{}
						}
					default:
						ack = append(ack, m.ID)
						idx = append(idx, len(log))
					}
					log = append(log, d)
				}
				ok, err := qAckAll(db, q, ack, rng.IntN(2) == 0)
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
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	byJob := map[qJob][]qDelivery{}
	for _, log := range logs {
		for _, d := range log {
			byJob[d.job] = append(byJob[d.job], d)
		}
	}
	require.Len(t, byJob, total, "every message delivered")
	firstSeq := make([][]int64, producers)
	for p := range firstSeq {
		firstSeq[p] = make([]int64, perProducer)
	}
	var seqs []int64
	redelivered := 0
	for j, ds := range byJob {
		slices.SortFunc(ds, func(a, b qDelivery) int { return a.attempts - b.attempts })
		nacked := 0
		for k, d := range ds {
			require.Equal(t, k+1, d.attempts, "%v: deliveries are counted", j)
			require.Equal(t, ds[0].seq, d.seq)
			if d.acked {
				nacked++
				require.Equal(t, len(ds)-1, k, "%v: delivered again after a successful ack", j)
			}
			if k > 0 {
				prev := ds[k-1]
				if prev.released.IsZero() {
					require.False(t, d.at.Before(prev.deadline.Add(lapse)), "%v: delivery %d at %v, within the lease of delivery %d (until %v)", j, k+1, d.at, k, prev.deadline)
				}
			}
		}
		require.Equal(t, 1, nacked, "%v: acked exactly once", j)
		redelivered += len(ds) - 1
		firstSeq[j.Producer][j.N] = ds[0].seq
		seqs = append(seqs, ds[0].seq)
	}
	for p, ss := range firstSeq {
		require.True(t, slices.IsSorted(ss), "producer %d: queue order follows enqueue order", p)
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		require.Equal(t, seqs[0]+int64(i), s, "sequence numbers are dense")
	}
	if !shared {
		for c, log := range logs {
			var last int64
			for _, d := range log {
				if d.attempts == 1 {
					require.Greater(t, d.seq, last, "consumer %d: first deliveries in queue order", c)
					last = d.seq
				}
			}
		}
	}
	q := qOpen(t, dbs[0], "pc", qopts)
	st := q.Stats()
	require.Equal(t, queue.Stats{Head: seqs[len(seqs)-1] + 1, Tail: seqs[len(seqs)-1] + 1}, st)
	t.Logf("%d redeliveries, final %+v", redelivered, st)
	Healthy(t, dbs[0])
}

// qAckAll acks ids together, alone or in an Update. If some lease was
// lost, it acks the others one by one. It reports which ids were acked.
func qAckAll(db *tipkv.DB, q *queue.Queue[qJob], ids []queue.ID, inUpdate bool) ([]bool, error) {
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
