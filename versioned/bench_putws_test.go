package versioned_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/paired"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/versioned"
)

// Put of random documents among 1,000,000 against Put among 10,000 (issue
// 14: within 1.2x), each size in its own DB on disk, NoSync, with
// CacheEntries above the working set so that neither reads before it
// writes, compacted first; and, as the floor, the same for raw Pebble on tipkv's options:
// a one-Set commit of the next version's key of a random key among
// 1,000,000 against among 10,000. The second pair says how much of the
// first is the engine's (a larger memtable skiplist to insert into, more
// to flush and compact); what tipkv adds on top is the quotient.
//
// Both sizes live in one process, paired by paired.Ratio (CPU time, each
// chunk charged its flushes, compactions and collections); the garbage
// collector scans the large version cache for either side alike, so a
// process holding only the small set would collect less. Read ratio-total.
//
//	go test -run '^$' -bench 'BenchmarkPutWorkingSet' -benchtime 210000x -count 3 ./versioned/
func BenchmarkPutWorkingSet(b *testing.B) {
	const small, large = 10_000, 1_000_000
	// The stores belong to the parent, built once: a sub-benchmark runs
	// once with b.N = 1 before its measured run.
	var puts, sets [2]func()
	b.Run("op=put-1m/vs=put-10k", func(sb *testing.B) {
		if puts[0] == nil {
			puts = [2]func(){putWorkingSet(b, small), putWorkingSet(b, large)}
		}
		paired.Ratio(sb, puts[1], puts[0])
	})
	b.Run("op=set-1m/vs=set-10k", func(sb *testing.B) {
		if sets[0] == nil {
			sets = [2]func(){setWorkingSet(b, small), setWorkingSet(b, large)}
		}
		paired.Ratio(sb, sets[1], sets[0])
	})
}

// putWorkingSet writes n documents and returns a Put of a random one.
func putWorkingSet(b *testing.B, n int) func() {
	db, err := tipkv.Open(filepath.Join(b.TempDir(), "db"), &tipkv.Options{NoSync: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	c, err := versioned.NewCollection(db, vbColl, &versioned.Options[[]byte]{Codec: codec.Raw{}, CacheEntries: 2_000_000})
	require.NoError(b, err)
	val := make([]byte, vbValueSize)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("document-%07d", i)
	}
	for i := 0; i < n; i += 1000 {
		require.NoError(b, db.Update(func(w *tipkv.Batch) error {
			for _, id := range ids[i:min(i+1000, n)] {
				if _, err := c.Put(w, id, val); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	require.NoError(b, db.Compact())
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	return func() {
		if _, err := c.Put(db, ids[rng.IntN(n)], val); err != nil {
			b.Fatal(err)
		}
	}
}

// setWorkingSet writes version 1 of n keys laid out as documents in raw
// Pebble (tipkv's options) and returns a one-Set commit of the next
// version of a random one.
func setWorkingSet(b *testing.B, n int) func() {
	cache := pebble.NewCache(128 << 20)
	defer cache.Unref()
	db, err := pebble.Open(filepath.Join(b.TempDir(), "raw"), pebblestore.Options(pebblestore.Config{MemTableSize: 16 << 20}, cache))
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	val := make([]byte, vbValueSize)
	prefixes := make([][]byte, n)
	versions := make([]int64, n)
	batch := db.NewBatch()
	for i := range prefixes {
		prefixes[i] = vbPrefix(fmt.Sprintf("document-%07d", i))
		versions[i] = 1
		require.NoError(b, batch.Set(codec.AppendDesc(prefixes[i], 1), val, nil))
		if batch.Len() > 4<<20 {
			require.NoError(b, batch.Commit(pebble.NoSync))
			batch = db.NewBatch()
		}
	}
	require.NoError(b, batch.Commit(pebble.NoSync))
	require.NoError(b, db.Compact(b.Context(), []byte{0}, []byte{0xff}, true))
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	var key []byte
	return func() {
		i := rng.IntN(n)
		versions[i]++
		key = codec.AppendDesc(append(key[:0], prefixes[i]...), versions[i])
		if err := db.Set(key, val, pebble.NoSync); err != nil {
			b.Fatal(err)
		}
	}
}
