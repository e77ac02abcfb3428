package tipkvtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// Queue tests with many consumers at once: goroutines sharing one handle
// (a handle is safe for concurrent use) and, on a shared engine, handles
// standing for processes. Every consumer receives and acknowledges what it
// got; nothing may fail (no ErrLeaseLost for a lease nobody else was
// given, no ErrConflict from consumers crowding the head), and every
// message is delivered once. Leases are long and the clock stands still,
// so no lease lapses: a second delivery of a message is a defect.

func queueConcurrencyCases() []testCase {
	return []testCase{
		{"ConcurrentReceiveAckOneHandle", testQueueConcurrentReceiveAck},
		{"ManyConsumersOneHandle", testQueueManyConsumersOneHandle},
		{"ManyConsumersManyHandles", testQueueManyConsumersManyHandles},
		{"ProducersConsumers", testQueueProducersConsumers},
	}
}

// qFill enqueues n messages (qJob{N: 0..n-1}) in chunks that fit every
// engine's batch limits.
func qFill(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], n int) {
	t.Helper()
	const chunk = 100
	for i := 0; i < n; i += chunk {
		js := make([]qJob, 0, chunk)
		for k := i; k < min(i+chunk, n); k++ {
			js = append(js, qJob{N: k})
		}
		qPush(t, db, q, js...)
	}
}

// qConsumer is one consumer of qConsume: its handle and queue, how many
// it receives per call, and whether it blocks in ReceiveWait.
type qConsumer struct {
	db   *tipkv.DB
	q    *queue.Queue[qJob]
	max  int
	wait bool
}

// qConsume runs the consumers until total messages are acknowledged, each
// in its own goroutine: receive, then acknowledge everything received in
// one Ack. It fails the test on any error and on a message delivered
// twice or never.
func qConsume(t *testing.T, total int, cs []qConsumer) {
	t.Helper()
	const lease = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	seen := make([]int, total) // deliveries per message
	var acked atomic.Int64
	errs := make(chan error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var ms []queue.Message[qJob]
				var err error
				if c.wait {
					ms, err = c.q.ReceiveWait(ctx, c.max, lease)
					if ctx.Err() != nil {
						return
					}
				} else {
					ms, err = c.q.Receive(c.max, lease)
				}
				if err != nil {
					errs <- fmt.Errorf("consumer %d: receive: %w", i, err)
					cancel()
					return
				}
				if len(ms) == 0 {
					// Everything visible is leased by others, who will
					// acknowledge it: look again.
					runtimeYield()
					continue
				}
				mu.Lock()
				for _, m := range ms {
					if m.Value.N < 0 || m.Value.N >= total {
						mu.Unlock()
						errs <- fmt.Errorf("consumer %d: message %v was never enqueued", i, m.Value)
						cancel()
						return
					}
					seen[m.Value.N]++
				}
				mu.Unlock()
				if err := c.q.Ack(c.db, qIDs(ms)...); err != nil {
					errs <- fmt.Errorf("consumer %d: ack of %d messages (first seq %d): %w", i, len(ms), ms[0].Seq, err)
					cancel()
					return
				}
				if acked.Add(int64(len(ms))) >= int64(total) {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, total, acked.Load(), "messages acknowledged")
	for n, k := range seen {
		require.Equal(t, 1, k, "message %d delivered %d times", n, k)
	}
}

// runtimeYield lets the other consumers run before a consumer that found
// nothing looks again.
func runtimeYield() { time.Sleep(50 * time.Microsecond) }

// Eight goroutines on one handle receive 100 at a time (half of them in
// ReceiveWait) and acknowledge what they got, over a preloaded queue:
// every Ack succeeds, every message is delivered once. (On a shared
// engine, a Receive that read the queue before another goroutine's
// Receive committed used to drop that goroutine's fresh lease, and its
// Ack failed with ErrLeaseLost.)
func testQueueConcurrentReceiveAck(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[qJob](t, db, "conc", nil)
	total := b.N(10000)
	qFill(t, db, q, total)
	cs := make([]qConsumer, 8)
	for i := range cs {
		cs[i] = qConsumer{db: db, q: q, max: 100, wait: i%2 == 1}
	}
	qConsume(t, total, cs)
	require.Equal(t, 0, q.Len())
	Healthy(t, db)
}

// Thirty-two goroutines on one handle receive one message at a time, all
// at the head of the queue: none fails (a consumer that lost a message to
// another goroutine of its handle must not count it as a conflict), every
// message is delivered once.
func testQueueManyConsumersOneHandle(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[qJob](t, db, "head", nil)
	total := b.N(2000)
	qFill(t, db, q, total)
	cs := make([]qConsumer, 32)
	for i := range cs {
		cs[i] = qConsumer{db: db, q: q, max: 1, wait: i%4 == 3}
	}
	qConsume(t, total, cs)
	require.Equal(t, 0, q.Len())
	Healthy(t, db)
}

// Thirty-two handles (processes, on a shared engine) receive 10 or 100
// messages at a time from the head of one queue: none fails with
// ErrConflict (they claim disjoint messages instead of all racing for the
// first ones), every message is delivered once.
func testQueueManyConsumersManyHandles(t *testing.T, b backend) {
	for _, max := range []int{10, 100} {
		t.Run(fmt.Sprintf("max=%d", max), func(t *testing.T) {
			dbs := qHandles(t, b, 32, newQClock())
			total := b.N(100 * max)
			q0 := qOpen[qJob](t, dbs[0], "crowd", nil)
			qFill(t, dbs[0], q0, total)
			cs := make([]qConsumer, len(dbs))
			for i, db := range dbs {
				cs[i] = qConsumer{db: db, q: qOpen[qJob](t, db, "crowd", nil), max: max, wait: i%4 == 3}
			}
			qConsume(t, total, cs)
			require.Equal(t, 0, q0.Len())
			Healthy(t, dbs[0])
		})
	}
}
