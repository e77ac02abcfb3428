package queue

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/knobs"
)

// BenchmarkEnqueueState measures what writing the queue-state key in every
// enqueue would cost (see knobs.Queue.EnqueueWritesState): 8 producer goroutines
// enqueue one 100-byte message each per call, into 1 or 8 queues of one
// DB. The two variants run in alternating rounds of 1,000 enqueues on two
// DBs side by side, so that a busy machine slows both alike; the figures
// are ns per enqueue for each, and their ratio. Run:
//
//	go test -run '^$' -bench BenchmarkEnqueueState -benchtime 40x ./queue
func BenchmarkEnqueueState(b *testing.B) {
	const producers, round = 8, 1000
	for _, sync := range []bool{false, true} {
		for _, queues := range []int{1, 8} {
			b.Run(fmt.Sprintf("sync=%v,producers=%d,queues=%d", sync, producers, queues), func(b *testing.B) {
				defer knobs.Set(&knobs.Queue.EnqueueWritesState, false)()
				none := newEnqueueBench(b, !sync, queues)
				tail := newEnqueueBench(b, !sync, queues)
				var tNone, tTail time.Duration
				for i := range b.N {
					// Alternate which goes first, too.
					for k := range 2 {
						knobs.Queue.EnqueueWritesState = (i+k)%2 == 1
						if knobs.Queue.EnqueueWritesState {
							tTail += tail.run(b, producers, round)
						} else {
							tNone += none.run(b, producers, round)
						}
					}
				}
				n := float64(b.N * producers * round)
				b.ReportMetric(float64(tNone.Nanoseconds())/n, "none-ns/enqueue")
				b.ReportMetric(float64(tTail.Nanoseconds())/n, "tail-ns/enqueue")
				b.ReportMetric(float64(tTail)/float64(tNone), "tail/none")
				b.ReportMetric(0, "ns/op")
				none.check(b)
				tail.check(b)
			})
		}
	}
}

type enqueueBench struct {
	qs   []*Queue[[]byte]
	want int
}

func newEnqueueBench(b *testing.B, noSync bool, queues int) *enqueueBench {
	db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	e := &enqueueBench{qs: make([]*Queue[[]byte], queues)}
	for i := range e.qs {
		if e.qs[i], err = Open(db, fmt.Sprintf("q%d", i), &Options[[]byte]{Codec: codec.Raw{}}); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// run makes producers goroutines enqueue per messages each, and returns
// how long that took.
func (e *enqueueBench) run(b *testing.B, producers, per int) time.Duration {
	msg := make([]byte, 100)
	var wg sync.WaitGroup
	start := time.Now()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := e.qs[p%len(e.qs)]
			for range per {
				if _, err := q.Enqueue(q.c.db, msg); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	e.want += producers * per
	return time.Since(start)
}

func (e *enqueueBench) check(b *testing.B) {
	n := 0
	for _, q := range e.qs {
		n += q.Len()
	}
	if n != e.want {
		b.Fatalf("%d messages in the queues, want %d", n, e.want)
	}
}
