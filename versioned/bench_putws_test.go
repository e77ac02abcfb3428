package versioned_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

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
	return putWorkingSetSized(b, n, vbValueSize)
}

// randomValue returns size random bytes.
func randomValue(size int) []byte {
	rng := rand.New(rand.NewPCG(uint64(size), 3))
	v := make([]byte, size)
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	return v
}

// putWorkingSetSized is putWorkingSet with values of size random bytes
// (zeros at the default size, as the issue-14 rows measured).
func putWorkingSetSized(b *testing.B, n, size int) func() {
	db, err := tipkv.Open(filepath.Join(b.TempDir(), "db"), &tipkv.Options{NoSync: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	c, err := versioned.NewCollection(db, vbColl, &versioned.Options[[]byte]{Codec: codec.Raw{}, CacheEntries: 2_000_000})
	require.NoError(b, err)
	val := make([]byte, size)
	if size != vbValueSize {
		val = randomValue(size)
	}
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
	set, _ := setWorkingSetOpts(b, n, make([]byte, vbValueSize), false)
	return set
}

// issue 30's Put among 1,000,000 documents with 1 KiB values (random,
// incompressible), against among 10,000; its floor, and what Pebble's
// value separation does to the floor: raw Pebble one-Set
// commits on tipkv's options, 1,000,000 keys against 10,000, with values
// in the sstables (tipkv's default) and with values of 256 bytes and more
// in blob files (Options.Experimental.ValueSeparationPolicy); then, at
// 1,000,000, separated against not for the Set and for a Get of a random
// key (what a read pays for it). Each store's size on disk after the
// load's compaction is logged.
//
//	go test -run '^$' -bench 'BenchmarkPutWorkingSetValueSeparation' -benchtime 210000x -count 2 ./versioned/
func BenchmarkPutWorkingSetValueSeparation(b *testing.B) {
	const small, large, size = 10_000, 1_000_000, 1024
	type store struct{ set, get func() }
	var st map[string]store
	build := func() {
		if st != nil {
			return
		}
		st = map[string]store{}
		for _, blob := range []bool{false, true} {
			for _, n := range []int{small, large} {
				set, get := setWorkingSetOpts(b, n, randomValue(size), blob) // incompressible, as most 1 KiB documents are not runs of zeros
				st[fmt.Sprintf("%d/%v", n, blob)] = store{set, get}
			}
		}
	}
	var tk [2]func()
	b.Run("op=put-1m/vs=put-10k/size=1k", func(sb *testing.B) {
		if tk[0] == nil {
			tk = [2]func(){putWorkingSetSized(b, small, size), putWorkingSetSized(b, large, size)}
		}
		paired.Ratio(sb, tk[1], tk[0])
	})
	b.Run("op=set-1m/vs=set-10k/values=sstable", func(sb *testing.B) {
		build()
		paired.Ratio(sb, st["1000000/false"].set, st["10000/false"].set)
	})
	b.Run("op=set-1m/vs=set-10k/values=blob", func(sb *testing.B) {
		build()
		paired.Ratio(sb, st["1000000/true"].set, st["10000/true"].set)
	})
	b.Run("op=set-1m-blob/vs=set-1m-sstable", func(sb *testing.B) {
		build()
		paired.Ratio(sb, st["1000000/true"].set, st["1000000/false"].set)
	})
	b.Run("op=get-1m-blob/vs=get-1m-sstable", func(sb *testing.B) {
		build()
		paired.Ratio(sb, st["1000000/true"].get, st["1000000/false"].get)
	})
}

// setWorkingSetOpts is setWorkingSet with the values val, optionally
// separated into blob files, and also returns a Get of a random key.
func setWorkingSetOpts(b *testing.B, n int, val []byte, blob bool) (set, get func()) {
	cache := pebble.NewCache(128 << 20)
	defer cache.Unref()
	opts := pebblestore.Options(pebblestore.Config{MemTableSize: 16 << 20}, cache)
	if blob {
		opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
			return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 256, MaxBlobReferenceDepth: 10,
				RewriteMinimumAge: 5 * time.Minute, TargetGarbageRatio: 0.2}
		}
	}
	dir := filepath.Join(b.TempDir(), "raw")
	db, err := pebble.Open(dir, opts)
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	size := len(val)
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
	m := db.Metrics()
	b.Logf("%d keys of %d bytes, blob files %v: %d MiB on disk after compaction", n, size, blob, m.DiskSpaceUsage()>>20)
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	var key []byte
	set = func() {
		i := rng.IntN(n)
		versions[i]++
		key = codec.AppendDesc(append(key[:0], prefixes[i]...), versions[i])
		if err := db.Set(key, val, pebble.NoSync); err != nil {
			b.Fatal(err)
		}
	}
	rg := rand.New(rand.NewPCG(uint64(n), 2))
	var gk []byte
	get = func() {
		i := rg.IntN(n)
		gk = codec.AppendDesc(append(gk[:0], prefixes[i]...), versions[i])
		v, closer, err := db.Get(gk)
		if err != nil || len(v) != size {
			b.Fatal(err)
		}
		_ = closer.Close()
	}
	return set, get
}
