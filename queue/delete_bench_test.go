package queue

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/knobs"
)

// BenchmarkDeleteRuns receives and acks 1,000 messages per op, ack messages
// at a time, deleting each acked run with one DeleteRange (delete=range) or
// with point Deletes (delete=point), on disk. It is why
// knobs.Queue.ConsumedRangeMin exists: every new iterator re-fragments all the
// range tombstones in Pebble's memtable, so short ones make every read
// slower. Run:
//
//	go test -run '^$' -bench BenchmarkDeleteRuns -benchtime 20x ./queue
func BenchmarkDeleteRuns(b *testing.B) {
	for _, ack := range []int{5, 20, 50, 100, 250, 1000} {
		for _, del := range []string{"range", "point"} {
			b.Run(fmt.Sprintf("ack=%d,delete=%s", ack, del), func(b *testing.B) {
				n := 2
				if del == "point" {
					n = math.MaxInt
				}
				defer knobs.Set(&knobs.Queue.ConsumedRangeMin, n)()
				db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				q, err := Open(db, "q", &Options[[]byte]{Codec: codec.Raw{}})
				if err != nil {
					b.Fatal(err)
				}
				items := make([][]byte, 1000)
				for i := range items {
					items[i] = make([]byte, 100)
				}
				for range b.N {
					if _, err := q.Enqueue(db, items...); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					for left := 1000; left > 0; left -= ack {
						ms, err := q.Receive(min(ack, left), time.Hour)
						if err != nil || len(ms) != min(ack, left) {
							b.Fatalf("receive: %d, %v", len(ms), err)
						}
						ids := make([]ID, len(ms))
						for i, m := range ms {
							ids[i] = m.ID
						}
						if err := q.Ack(db, ids...); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
