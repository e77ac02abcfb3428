package sqlkv_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/sqlkv"
)

// Message groups on PostgreSQL (issue 27), each beside the same work
// without groups in the same run, interleaved (see pairedAs):
//
//	cd sqlkv && go test -run '^$' -bench TipkvGroups -benchtime 1000x -count 3 .
//
// op=receive-100-ack,groups=10000: Receive(100) and an Ack of the 100,
// the messages spread over 10,000 groups (window 1), against a queue
// without groups. op=quiet-wait,backlog=10000: enqueue one message of a
// quiet group, then Receive(10) and Ack until it comes (the wait ends when
// the Receive that delivers it returns), with 10,000 messages of a busy
// group in front of it, against a queue without them.
func BenchmarkTipkvGroups(b *testing.B) {
	open := func(b *testing.B) (*tipkv.DB, *queue.Queue[benchDoc]) {
		db, err := sqlkv.Open(context.Background(), sqlkv.Config{DSN: dsn(b), Table: newTable(b)}, &tipkv.Options{NoSync: true})
		require.NoError(b, err)
		b.Cleanup(func() { _ = db.Close() })
		q, err := queue.Open[benchDoc](db, "jobs", nil)
		require.NoError(b, err)
		return db, q
	}
	enqueue := func(b *testing.B, db *tipkv.DB, q *queue.Queue[benchDoc], group string, n int) {
		msgs := make([]benchDoc, 100)
		for ; n > 0; n -= len(msgs) {
			_, err := q.EnqueueWith(db, queue.EnqueueOptions{Group: group}, msgs[:min(n, len(msgs))]...)
			require.NoError(b, err)
		}
	}
	b.Run("op=receive-100-ack,groups=10000", func(b *testing.B) {
		const n, groups = 100, 10000
		db, q := open(b)
		db2, q2 := open(b)
		calls := b.N + 10 // pairedAs makes b.N calls of each, at least one per chunk
		enqueue(b, db2, q2, "", calls*n)
		for i := range calls * n {
			_, err := q.EnqueueWith(db, queue.EnqueueOptions{Group: fmt.Sprintf("g%05d", i%groups)}, benchDoc{N: i})
			require.NoError(b, err)
		}
		receiveAck := func(db *tipkv.DB, q *queue.Queue[benchDoc]) func(int) {
			return func(int) {
				ms, err := q.Receive(n, time.Hour)
				if err != nil || len(ms) != n {
					b.Fatalf("receive: %d messages, %v", len(ms), err)
				}
				ids := make([]queue.ID, len(ms))
				for i, m := range ms {
					ids[i] = m.ID
				}
				if err := q.Ack(db, ids...); err != nil {
					b.Fatal(err)
				}
			}
		}
		pairedAs(b, "ungrouped", wall(receiveAck(db, q)), wall(receiveAck(db2, q2)))
	})
	b.Run("op=quiet-wait,backlog=10000", func(b *testing.B) {
		const backlog = 10000
		db, q := open(b)
		db2, q2 := open(b)
		enqueue(b, db, q, "busy", backlog+b.N+10)
		wait := func(db *tipkv.DB, q *queue.Queue[benchDoc]) func(int) time.Duration {
			return func(int) time.Duration {
				start := time.Now()
				if _, err := q.EnqueueWith(db, queue.EnqueueOptions{Group: "quiet"}, benchDoc{}); err != nil {
					b.Fatal(err)
				}
				for {
					ms, err := q.Receive(10, time.Hour)
					if err != nil {
						b.Fatal(err)
					}
					took := time.Since(start)
					ids := make([]queue.ID, len(ms))
					for i, m := range ms {
						ids[i] = m.ID
					}
					if err := q.Ack(db, ids...); err != nil {
						b.Fatal(err)
					}
					if slices.ContainsFunc(ms, func(m queue.Message[benchDoc]) bool { return m.Group == "quiet" }) {
						return took
					}
				}
			}
		}
		wait(db, q)(0) // the first read of the backlog
		wait(db2, q2)(0)
		pairedAs(b, "no-backlog", wait(db, q), wait(db2, q2))
	})
}
