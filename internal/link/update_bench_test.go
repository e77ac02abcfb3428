package link_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/paired"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// BenchmarkUpdate measures the fixed cost of one commit through DB.Update
// on Pebble in exclusive mode (a Batch, its Tx and hooks, the store's
// batch, and the package's own work for the rows that use one), paired in
// the same run with a raw Pebble commit of the same number of Sets of
// 100-byte values, with tipkv's Pebble options (see paired.Ratio). Not
// synced: the sync would hide the machinery. The rows:
//
//	set=N      an Update writing N raw Sets through the storage Tx
//	enqueue=1  an Update enqueueing one 100-byte message (queue, codec.Raw)
//	append=N   an Update appending N 100-byte events to one feed stream
//	           (versioned.Feed, codec.Raw)
//	raw=1      the control: a one-Set commit on a second raw Pebble store
//	           against the first, the same work on both sides; its ratio's
//	           distance from 1 is the harness's bias in that run
//
// Run (the figures in BENCHMARKS.md, Write path):
//
//	go test -run '^$' -bench 'BenchmarkUpdate$' -benchtime 200000x -count 3 ./internal/link/
//
// A row of N >= 100 writes runs 10*b.N/N Updates (and raw batches of N
// Sets); ns/op is per Update.
func BenchmarkUpdate(b *testing.B) {
	val := make([]byte, 100)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	key := func(i int) []byte { return codec.AppendAsc([]byte{0x02, 'b', 0, 1}, int64(i)) }
	type row struct {
		name string
		sets int // Sets in the raw commit it is paired with
		// tip returns the Update's work; calls divides b.N.
		tip func(b *testing.B, db *tipkv.DB) func(bt *tipkv.Batch) error
	}
	rows := []row{
		{"set=1", 1, nil},
		{"set=100", 100, nil},
		{"enqueue=1", 1, func(b *testing.B, db *tipkv.DB) func(bt *tipkv.Batch) error {
			q, err := queue.Open(db, "bench", &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1})
			require.NoError(b, err)
			return func(bt *tipkv.Batch) error { _, err := q.Enqueue(bt, val); return err }
		}},
		{"append=1", 1, nil},
		{"append=1000", 1000, nil},
		{"raw=1", 1, nil},
	}
	for _, r := range rows {
		b.Run(r.name, func(b *testing.B) {
			db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
			require.NoError(b, err)
			defer db.Close()
			openRaw := func() *pebble.DB {
				cache := pebble.NewCache(128 << 20)
				raw, err := pebble.Open(b.TempDir(), pebblestore.Options(pebblestore.Config{MemTableSize: 16 << 20}, cache))
				cache.Unref()
				require.NoError(b, err)
				b.Cleanup(func() { _ = raw.Close() })
				return raw
			}
			raw := openRaw()
			n, m := 0, 0
			var work func(bt *tipkv.Batch) error
			switch {
			case r.tip != nil:
				work = r.tip(b, db)
			case strings.HasPrefix(r.name, "append"):
				f, err := versioned.NewFeed(db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
				require.NoError(b, err)
				work = func(bt *tipkv.Batch) error {
					for range r.sets {
						if _, err := f.Append(bt, "bench", val); err != nil {
							return err
						}
					}
					return nil
				}
			default:
				work = func(bt *tipkv.Batch) error {
					return link.Write(bt, func(tx *link.Tx) error {
						for range r.sets {
							n++
							if err := tx.Batch.Set(key(n), val); err != nil {
								return err
							}
						}
						return nil
					})
				}
			}
			commit := func(raw *pebble.DB, m *int) {
				bt := raw.NewBatch()
				for range r.sets {
					*m++
					_ = bt.Set(key(*m), val, nil)
				}
				require.NoError(b, bt.Commit(pebble.NoSync))
				_ = bt.Close()
			}
			tip := func() { require.NoError(b, db.Update(work)) }
			if r.name == "raw=1" {
				raw2 := openRaw()
				tip = func() { commit(raw2, &n) }
			}
			base := func() { commit(raw, &m) }
			if r.sets >= 100 {
				paired.RatioN(b, max(b.N*10/r.sets, paired.Rounds), tip, base)
				return
			}
			paired.Ratio(b, tip, base)
		})
	}
}
