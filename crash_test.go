package tipkv_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
)

var crashSeed = flag.Uint64("crash.seed", 0, "replay one crash-test seed")

// crashSeeds returns the seeds a crash test runs: the one given with
// -crash.seed, or n random ones (printed, so a failure can be replayed).
func crashSeeds(t *testing.T, n int) []uint64 {
	if *crashSeed != 0 {
		return []uint64{*crashSeed}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = rand.Uint64()
	}
	return seeds
}

// Raw atomic batches on a crashable file system: after a crash at a random
// point, every synced Update is whole, every Update is all or nothing, and
// the store opens.
func TestCrashBatchesAtomic(t *testing.T) {
	for _, seed := range crashSeeds(t, 20) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test -run 'TestCrashBatchesAtomic' -crash.seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, seed))
			fs := vfs.NewCrashableMem()
			noSync := rng.IntN(2) == 0
			db, err := tipkv.OpenFS("db", fs, &tipkv.Options{NoSync: noSync})
			require.NoError(t, err)
			const keysPer = 5
			n := 50 + rng.IntN(200)
			acked := 0
			var crashed *vfs.MemFS
			crashAt := rng.IntN(n)
			for i := range n {
				if i == crashAt {
					crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
					break
				}
				require.NoError(t, db.Update(func(b *tipkv.Batch) error {
					for k := range keysPer {
						if err := put(b, fmt.Sprintf("\x06%06d-%d", i, k), fmt.Sprint(i)); err != nil {
							return err
						}
					}
					return nil
				}))
				acked = i + 1
			}
			require.NoError(t, db.Close())

			db2, err := tipkv.OpenFS("db", crashed, nil)
			require.NoError(t, err)
			defer db2.Close()
			s, _ := link.Store(db2)
			// Count the keys of each Update; each is 0 or keysPer, and the
			// present Updates form a prefix 0..m-1 (the WAL is ordered).
			counts := map[int]int{}
			it, err := s.NewIter([]byte{0x06}, []byte{0x07})
			require.NoError(t, err)
			for ok := it.First(); ok; ok = it.Next() {
				var i, k int
				_, err := fmt.Sscanf(string(it.Key()[1:]), "%06d-%d", &i, &k)
				require.NoError(t, err)
				counts[i]++
			}
			require.NoError(t, it.Close())
			m := len(counts)
			for i := range m {
				require.Equal(t, keysPer, counts[i], "update %d is partial or missing while later ones survived", i)
			}
			require.LessOrEqual(t, m, acked, "an update that was never acknowledged appeared")
			if !noSync {
				require.Equal(t, acked, m, "a synced, acknowledged update was lost")
			}
		})
	}
}
