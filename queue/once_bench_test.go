package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/paired"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Idempotency keys, paired in one process (internal/paired): EnqueueOnce
// of new keys against Enqueue, 1 and 100 messages per Update (issue 27's
// target: at most 1.3x), and a duplicate EnqueueOnce on the DB (one read
// of the key's record, and for UntilDone one of the message) against a
// hot Latest (target: at most 1.1x). Run:
//
//	go test -run '^$' -bench 'BenchmarkOnce' -benchtime 4200x ./queue
func BenchmarkOnceEnqueue(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, per := range []int{1, 100} {
			b.Run(fmt.Sprintf("per-update=%d/sync=%v", per, sync), func(b *testing.B) {
				db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: !sync})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = db.Close() })
				opts := &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1}
				once, err := queue.Open(db, "once", opts)
				if err != nil {
					b.Fatal(err)
				}
				plain, err := queue.Open(db, "plain", opts)
				if err != nil {
					b.Fatal(err)
				}
				value := qbItems(1)[0]
				items := make([][]byte, per)
				for i := range items {
					items[i] = value
				}
				n := 0
				op := func() {
					if err := db.Update(func(tx *tipkv.Batch) error {
						for range per {
							n++
							if _, dup, err := once.EnqueueOnce(tx, fmt.Sprint("key-", n), tipkv.Window(time.Hour), value); err != nil || dup {
								return fmt.Errorf("dup %v: %w", dup, err)
							}
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				base := func() {
					if _, err := plain.Enqueue(db, items...); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				paired.Ratio(b, op, base)
			})
		}
	}
}

func BenchmarkOnceDuplicate(b *testing.B) {
	for _, scope := range []tipkv.Scope{tipkv.Window(time.Hour), tipkv.UntilDone()} {
		b.Run(fmt.Sprintf("scope=%s", scope), func(b *testing.B) {
			db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = db.Close() })
			q, err := queue.Open(db, "once", &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1})
			if err != nil {
				b.Fatal(err)
			}
			docs, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
			if err != nil {
				b.Fatal(err)
			}
			value := qbItems(1)[0]
			first, _, err := q.EnqueueOnce(db, "key", scope, value)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := docs.Put(db, "doc", value); err != nil {
				b.Fatal(err)
			}
			op := func() {
				seq, dup, err := q.EnqueueOnce(db, "key", scope, value)
				if err != nil || !dup || seq != first {
					b.Fatal(seq, dup, err)
				}
			}
			base := func() {
				d, err := docs.Latest("doc")
				if err != nil || d.Version != 1 {
					b.Fatal(d.Version, err)
				}
			}
			b.ReportAllocs()
			paired.Ratio(b, op, base)
		})
	}
}
