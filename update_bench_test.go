package tipkv_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
	"github.com/tipkv/tipkv/internal/storage/pebblestore"
)

// BenchmarkUpdate measures the fixed cost of one commit through DB.Update
// (a Batch, its Tx and hooks, the store's batch) against a raw Pebble
// commit of the same one Set, with tipkv's Pebble options, in the same
// run, interleaved in chunks. Not synced: the sync would hide the
// machinery. Report: ns/op of each, and their ratio (tipkv / raw).
func BenchmarkUpdate(b *testing.B) {
	for _, sets := range []int{1, 100} {
		b.Run("sets="+itoa(sets), func(b *testing.B) {
			db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
			require.NoError(b, err)
			defer db.Close()
			cache := pebble.NewCache(128 << 20)
			raw, err := pebble.Open(b.TempDir(), pebblestore.Options(pebblestore.Config{MemTableSize: 16 << 20}, cache))
			cache.Unref()
			require.NoError(b, err)
			defer raw.Close()
			key := func(i int) []byte { return codec.AppendAsc([]byte{0x02, 'b', 0, 1}, int64(i)) }
			val := make([]byte, 100)
			n := 0
			tip := func() {
				require.NoError(b, db.Update(func(bt *tipkv.Batch) error {
					return link.Write(bt, func(tx *storage.Tx) error {
						for range sets {
							n++
							if err := tx.Batch.Set(key(n), val); err != nil {
								return err
							}
						}
						return nil
					})
				}))
			}
			base := func() {
				bt := raw.NewBatch()
				for range sets {
					n++
					_ = bt.Set(key(n), val, nil)
				}
				require.NoError(b, bt.Commit(pebble.NoSync))
				_ = bt.Close()
			}
			pairedRatio(b, tip, base)
		})
	}
}
