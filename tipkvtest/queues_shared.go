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

// Queue tests with several processes on one store (the harness's Second): each
// handle stands for a process, with memory of its own.

// qHandles returns n DB handles on one new store, all on clock, or skips
// the test on an engine with no second handle.
func qHandles(t *testing.T, b backend, n int, clock *qClock) []*tipkv.DB {
	t.Helper()
	if b.Second == nil {
		t.Skip("the backend has no second handle (an exclusive engine)")
	}
	opts := &tipkv.Options{Clock: clock.Now}
	dbs := []*tipkv.DB{b.Open(t, opts)}
	for len(dbs) < n {
		dbs = append(dbs, b.Second(t, dbs[0], opts))
	}
	return dbs
}

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

// Two producer and two consumer handles: producers enqueue in chunks,
// alone or inside Updates; consumers receive, ack most messages, release
// some and drop a few (whose leases then lapse as the clock moves). At the
// end: every message acked exactly once; a redelivery only after a
// delivery that was not acked, and never before that delivery's lease
// ended (plus ClockSkew) unless it was released; attempts count
// deliveries; each producer's messages in its order; sequence numbers
// dense.
func testQueueSharedProducersConsumers(t *testing.T, b backend) {
	clock := newQClock()
	dbs := qHandles(t, b, 4, clock)
	lapse := qLapse(t, dbs[0])
	const producers, consumers = 2, 2
	perProducer := b.N(1000)
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
		db := dbs[p]
		q := qOpen(t, db, "shared", qopts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			for i := 0; i < perProducer; {
				n := min(1+rng.IntN(8), perProducer-i)
				chunk := make([]qJob, n)
				for k := range chunk {
					chunk[k] = qJob{Producer: p, N: i + k}
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

	const lease = time.Minute
	logs := make([][]qDelivery, consumers)
	for c := range consumers {
		db := dbs[producers+c]
		q := qOpen(t, db, "shared", qopts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(100+c)))
			var log []qDelivery
			defer func() { logs[c] = log }()
			for acked.Load() < int64(total) {
				before := clock.Now() // the lease ends no sooner than lease after this
				ms, err := q.Receive(1+rng.IntN(8), lease)
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
						err := q.Ack(db, m.ID)
						if err != nil && !errors.Is(err, queue.ErrLeaseLost) {
							errs <- fmt.Errorf("consumer %d: ack: %w", c, err)
							return
						}
						if err == nil {
							d.acked = true
							if acked.Add(1) == int64(total) {
								cancel()
							}
						}
					}
					log = append(log, d)
				}
			}
		}()
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
	q := qOpen(t, dbs[0], "shared", qopts)
	st := q.Stats()
	require.Equal(t, queue.Stats{Head: seqs[len(seqs)-1] + 1, Tail: seqs[len(seqs)-1] + 1}, st)
	t.Logf("%d redeliveries, final %+v", redelivered, st)
	Healthy(t, dbs[0])
}

// Three handles pop one queue while a fourth enqueues: no message is
// popped twice, none is lost.
func testQueueSharedPop(t *testing.T, b backend) {
	clock := newQClock()
	dbs := qHandles(t, b, 4, clock)
	n := b.N(1000)
	producer := qOpen[int](t, dbs[3], "pop", nil)
	half := make([]int, n/2)
	for i := range half {
		half[i] = i
	}
	qEnqueue(t, dbs[3], producer, half)
	var popped atomic.Int64
	var wg sync.WaitGroup
	got := make([][]int, 3)
	errs := make(chan error, 4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := n / 2; i < n; i += 10 {
			vals := make([]int, 0, 10)
			for v := i; v < min(i+10, n); v++ {
				vals = append(vals, v)
			}
			if err := producer.Enqueue(dbs[3], vals...); err != nil {
				errs <- err
				return
			}
		}
	}()
	for c := range 3 {
		q := qOpen[int](t, dbs[c], "pop", nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for popped.Load() < int64(n) {
				ms, err := q.Pop(1 + c*7)
				if err != nil {
					errs <- fmt.Errorf("popper %d: %w", c, err)
					return
				}
				for _, m := range ms {
					got[c] = append(got[c], m.Value)
				}
				popped.Add(int64(len(ms)))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var all []int
	for _, g := range got {
		require.True(t, slices.IsSorted(g), "each popper gets the queue's order")
		all = append(all, g...)
	}
	slices.Sort(all)
	require.Len(t, all, n, "nothing popped twice")
	for i, v := range all {
		require.Equal(t, i, v, "nothing lost")
	}
	require.Zero(t, producer.Len())
	Healthy(t, dbs[0])
}

// A lease held by A is never delivered to B before it ends (plus
// ClockSkew); then B takes it over, and A's late Ack, Release, Retry and
// Extend are ErrLeaseLost. A lease that lapsed but was not taken over is
// still A's.
func testQueueSharedLease(t *testing.T, b backend) {
	clock := newQClock()
	dbs := qHandles(t, b, 2, clock)
	lapse := qLapse(t, dbs[0])
	a := qOpen[string](t, dbs[0], "lease", nil)
	bq := qOpen[string](t, dbs[1], "lease", nil)
	require.NoError(t, a.Enqueue(dbs[0], "x", "y"))
	const lease = time.Minute
	held, err := a.Receive(2, lease)
	require.NoError(t, err)
	require.Len(t, held, 2)

	start := clock.Now()
	points := []time.Duration{0, lease - 1}
	if lapse > 0 {
		points = append(points, lease, lease+lapse-1)
	}
	for _, at := range points {
		clock.Advance(start.Add(at).Sub(clock.Now()))
		ms, err := bq.Receive(10, lease)
		require.NoError(t, err)
		require.Empty(t, ms, "B received a message A holds, %v into a lease of %v", at, lease)
		ms, err = bq.Pop(10)
		require.NoError(t, err)
		require.Empty(t, ms, "B popped a message A holds")
		peek, err := bq.Peek(10)
		require.NoError(t, err)
		require.Empty(t, peek)
		require.Equal(t, 2, bq.Stats().Leased)
		require.ErrorIs(t, bq.Ack(dbs[1], held[0].ID), queue.ErrLeaseLost, "B cannot use A's IDs")
	}
	// Lapsed, not yet taken over: still A's.
	require.NoError(t, a.Extend(held[1].ID, lease))

	clock.Advance(1) // lease + lapse after the Receive
	taken, err := bq.Receive(10, lease)
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, qValues(taken), "taken over once the lease ended ClockSkew ago")
	require.Equal(t, 2, taken[0].Attempts)
	require.ErrorIs(t, a.Ack(dbs[0], held[0].ID), queue.ErrLeaseLost, "A's late ack")
	require.ErrorIs(t, a.Release(held[0].ID, 0), queue.ErrLeaseLost)
	require.ErrorIs(t, a.Retry(held[0].ID), queue.ErrLeaseLost)
	require.ErrorIs(t, a.Extend(held[0].ID, time.Hour), queue.ErrLeaseLost)
	err = dbs[0].Update(func(b *tipkv.Batch) error { return a.Ack(b, held[0].ID) })
	require.ErrorIs(t, err, queue.ErrLeaseLost, "inside an Update too")
	require.NoError(t, bq.Ack(dbs[1], taken[0].ID))

	require.NoError(t, a.Ack(dbs[0], held[1].ID), "the extended lease")
	require.Zero(t, a.Len())
	require.Zero(t, bq.Len())
	Healthy(t, dbs[0])
}

// B's Wait wakes after A's Enqueue, after A's Release of the only message
// (which writes the item, not the queue's state), and, after Wake, once a
// lease A holds has lapsed by the clock: whether the engine watches or B
// polls.
func testQueueSharedWait(t *testing.T, b backend) {
	clock := newQClock()
	dbs := qHandles(t, b, 2, clock)
	a := qOpen[int](t, dbs[0], "wait", nil)
	bq := qOpen[int](t, dbs[1], "wait", nil)
	wait := func() chan error {
		woke := make(chan error, 1)
		go func() { woke <- bq.Wait(t.Context()) }()
		return woke
	}
	// An empty queue: Wait blocks (the only bound is on how long it may
	// take to notice, never on how fast).
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	require.ErrorIs(t, bq.Wait(short), context.DeadlineExceeded)
	cancel()

	woke := wait()
	require.NoError(t, a.Enqueue(dbs[0], 1))
	require.NoError(t, <-woke, "after A's enqueue")

	ms, err := a.Receive(1, time.Hour)
	require.NoError(t, err)
	short, cancel = context.WithTimeout(t.Context(), 20*time.Millisecond)
	require.ErrorIs(t, bq.Wait(short), context.DeadlineExceeded, "A holds the only message")
	cancel()
	woke = wait()
	require.NoError(t, a.Release(ms[0].ID, 0))
	require.NoError(t, <-woke, "after A's release")

	ms, err = a.Receive(1, time.Hour)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	woke = wait()
	clock.Advance(time.Hour + qLapse(t, dbs[0]))
	queue.Wake(dbs[1])
	require.NoError(t, <-woke, "after the lease lapsed")
	got, err := bq.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 3, got[0].Attempts, "received, released, received, lapsed")
	Healthy(t, dbs[0])
}
