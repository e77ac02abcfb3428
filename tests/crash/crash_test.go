package crash_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/tests/internal/workload"
)

// Raw atomic batches on a crashable file system: after a crash at a random
// point, every synced Update is whole, every Update is all or nothing, and
// the store opens.
func TestCrashBatchesAtomic(t *testing.T) {
	for _, seed := range testutil.CrashSeeds(t, 20) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/crash -run 'TestCrashBatchesAtomic' -crash.seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, seed))
			fs := vfs.NewCrashableMem()
			noSync := rng.IntN(2) == 0
			db, err := openFS("db", fs, &tipkv.Options{NoSync: noSync})
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
						if err := testutil.PutRaw(b, fmt.Sprintf("\x06%06d-%d", i, k), fmt.Sprint(i)); err != nil {
							return err
						}
					}
					return nil
				}))
				acked = i + 1
			}
			require.NoError(t, db.Close())

			db2, err := openFS("db", crashed, nil)
			require.NoError(t, err)
			defer db2.Close()
			s, _ := link.StoreOf(db2)
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

// The mixed workload (document Puts, feed Appends, queue Enqueue, Receive
// and Ack, outbox Updates) crashed at a random point on a crashable file
// system, synced or not, then reopened and checked; then run on and checked
// again, so that versions and sequences continue correctly after recovery.
func TestCrashWorkload(t *testing.T) {
	for _, seed := range testutil.CrashSeeds(t, 24) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/crash -run 'TestCrashWorkload' -crash.seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
			noSync := rng.IntN(3) == 0
			fs := vfs.NewCrashableMem()
			db, err := openFS("db", fs, &tipkv.Options{NoSync: noSync, MemTableSize: 256 << 10})
			require.NoError(t, err)
			var lines []string
			w, err := workload.New(db, rng, 0, func(l string) { lines = append(lines, l) })
			require.NoError(t, err)
			steps := 50 + rng.IntN(400)
			for i := range steps {
				require.NoError(t, w.Step(), "step %d", i)
				if rng.IntN(100) == 0 {
					require.NoError(t, db.Flush())
				}
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
			require.NoError(t, db.Close())

			db, err = openFS("db", crashed, &tipkv.Options{NoSync: noSync})
			require.NoError(t, err, "reopen after the crash")
			a, err := workload.ParseLog(lines)
			require.NoError(t, err)
			require.NoError(t, a.Check(db, !noSync), "after the crash (noSync=%v, %d steps)", noSync, steps)

			// Run on from the recovered state: what happens next must be
			// consistent with it. The log of the lost writes no longer
			// describes the store, so check the new run on its own terms.
			if noSync {
				lines, err = workload.RecoveredLog(db)
				require.NoError(t, err)
			}
			w, err = workload.New(db, rng, 1<<40, func(l string) { lines = append(lines, l) })
			require.NoError(t, err)
			for i := range 100 {
				require.NoError(t, w.Step(), "step %d after recovery", i)
			}
			// Reopen (a clean restart drops the in-memory leases), then check.
			require.NoError(t, db.Close())
			db, err = openFS("db", crashed, nil)
			require.NoError(t, err)
			defer db.Close()
			a2, err := workload.ParseLog(lines)
			require.NoError(t, err)
			require.NoError(t, a2.Check(db, true), "after recovery, 100 more steps and a restart")
		})
	}
}
