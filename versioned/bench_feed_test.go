package versioned_test

import (
	"bytes"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/paired"
	"github.com/tipkv/tipkv/versioned"
)

// BenchmarkFeedAppend pairs Feed.Append with raw Pebble writing the same
// keys (04 | stream | desc(position)) and 100-byte values, NoSync on both
// sides, on disk, each in a store of its own configured as tipkv
// configures Pebble:
//
//   - events=1: one Append per Update against one raw batch of one Set,
//     committed;
//   - events=1000: one Update of 1,000 Appends to one stream against one
//     raw batch of 1,000 Sets.
//
// ratio is tipkv's time over raw Pebble's (targets: 1.4 and 1.3).
//
//	go test -run '^$' -bench BenchmarkFeedAppend -count 6 ./versioned/
func BenchmarkFeedAppend(b *testing.B) {
	value := bytes.Repeat([]byte{'v'}, 100)
	for _, events := range []int{1, 1000} {
		b.Run("events="+strconv.Itoa(events), func(b *testing.B) {
			dir := b.TempDir()
			db, err := tipkv.Open(filepath.Join(dir, "tipkv"), &tipkv.Options{NoSync: true})
			require.NoError(b, err)
			defer db.Close()
			f, err := versioned.NewFeed[[]byte](db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
			require.NoError(b, err)
			raw := vbOpenPebble(b, filepath.Join(dir, "raw"))
			defer raw.Close()
			prefix := codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeed), "clicks")
			var n int64 = time.Now().UnixNano()
			key := make([]byte, 0, 64)
			op := func() {
				if events == 1 {
					if _, err := f.Append(db, "clicks", value); err != nil {
						b.Fatal(err)
					}
					return
				}
				if err := db.Update(func(tx *tipkv.Batch) error {
					for range events {
						if _, err := f.Append(tx, "clicks", value); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			base := func() {
				batch := raw.NewBatch()
				for range events {
					n++
					key = codec.AppendDesc(append(key[:0], prefix...), n)
					if err := batch.Set(key, value, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := batch.Commit(pebble.NoSync); err != nil {
					b.Fatal(err)
				}
				_ = batch.Close()
			}
			b.ReportAllocs()
			paired.Ratio(b, op, base)
		})
	}
}
