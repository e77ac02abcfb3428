package queue_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/paired"
	"github.com/tipkv/tipkv/queue"
)

// Message groups against the same work without groups, paired in one
// process (paired.Ratio: interleaved rounds in alternating order, on CPU
// time), NoSync, on disk. Run:
//
//	go test ./queue -run '^$' -bench BenchmarkQueueGroups -benchtime 3000x
func BenchmarkQueueGroups(b *testing.B) {
	// Receive(100) and an Ack of the 100, with the messages spread over
	// 10,000 groups (message i in group i mod 10,000, window 1), against
	// the same on a queue without groups.
	b.Run("op=receive-100-ack,groups=10000", func(b *testing.B) {
		const n, groups = 100, 10000
		db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		db2, q2 := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		calls := qbCalls(b)
		qbEnqueue(b, db2, q2, calls*n)
		items := qbItems(1)
		for i := range calls * n {
			if _, err := q.EnqueueWith(db, queue.EnqueueOptions{Group: qbGroup(i % groups)}, items...); err != nil {
				b.Fatal(err)
			}
		}
		receiveAck := func(db *tipkv.DB, q *queue.Queue[[]byte]) func() {
			return func() {
				ms, err := q.Receive(n, time.Hour)
				if err != nil || len(ms) != n {
					b.Fatalf("receive: %d messages, %v", len(ms), err)
				}
				if err := q.Ack(db, qbIDs(ms)...); err != nil {
					b.Fatal(err)
				}
			}
		}
		op := receiveAck(db, q)
		defer qbAllocs(b, op)
		paired.Ratio(b, op, receiveAck(db2, q2))
	})

	// A quiet group's wait: enqueue one message of the group "quiet",
	// then Receive(10) and Ack what came until it comes (the wait ends
	// when the Receive that delivers it returns), on a queue where
	// 10,000 messages of the group "busy" wait in front of it, against
	// the same on a queue without them. Each call is timed on the wall
	// clock, both sides alternating; the metrics are the ratios of their
	// medians and 99th percentiles. The backlog is read once before the
	// timed calls (on Pebble a Receive reads past a window once; see
	// "Message groups" in the package doc).
	b.Run("op=quiet-wait,backlog=10000", func(b *testing.B) {
		const backlog = 10000
		db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		db2, q2 := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		rounds := max(b.N, 100)
		busy := qbItems(1000)
		for left := backlog + rounds + 1; left > 0; left -= len(busy) {
			if _, err := q.EnqueueWith(db, queue.EnqueueOptions{Group: "busy"}, busy[:min(left, len(busy))]...); err != nil {
				b.Fatal(err)
			}
		}
		quiet := qbItems(1)
		wait := func(db *tipkv.DB, q *queue.Queue[[]byte]) time.Duration {
			start := time.Now()
			if _, err := q.EnqueueWith(db, queue.EnqueueOptions{Group: "quiet"}, quiet...); err != nil {
				b.Fatal(err)
			}
			for {
				ms, err := q.Receive(10, time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				took := time.Since(start)
				if err := q.Ack(db, qbIDs(ms)...); err != nil {
					b.Fatal(err)
				}
				if slices.ContainsFunc(ms, func(m queue.Message[[]byte]) bool { return m.Group == "quiet" }) {
					return took
				}
			}
		}
		wait(db, q) // reads the backlog
		wait(db2, q2)
		with, without := make([]time.Duration, rounds), make([]time.Duration, rounds)
		b.ResetTimer()
		for i := range rounds {
			if i%2 == 0 {
				with[i], without[i] = wait(db, q), wait(db2, q2)
			} else {
				without[i], with[i] = wait(db2, q2), wait(db, q)
			}
		}
		b.StopTimer()
		slices.Sort(with)
		slices.Sort(without)
		at := func(ds []time.Duration, p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))]) }
		b.ReportMetric(at(with, 0.5)/at(without, 0.5), "p50-ratio")
		b.ReportMetric(at(with, 0.99)/at(without, 0.99), "p99-ratio")
		b.ReportMetric(at(with, 0.99)/1e3, "p99-us")
		b.ReportMetric(at(without, 0.99)/1e3, "base-p99-us")
	})
}

// qbGroup is the key of group i.
func qbGroup(i int) string { return fmt.Sprintf("g%05d", i) }
