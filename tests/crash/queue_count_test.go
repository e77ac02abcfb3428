package crash_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/check"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// The count a queue's state key keeps survives a crash at any point: many
// more enqueues than one state write covers (some aborted, leaving gaps),
// acks out of order and pops, then a crash that keeps a random part of
// what was not synced. Reopened, the queue counts exactly the messages it
// holds, and internal/check agrees with the stored count.
func TestCrashQueueCount(t *testing.T) {
	for _, seed := range testutil.CrashSeeds(t, 8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/crash -run 'TestCrashQueueCount' -crash.seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, seed^0xc0))
			noSync := rng.IntN(2) == 0
			fs := vfs.NewCrashableMem()
			db, err := openFS("db", fs, &tipkv.Options{NoSync: noSync, MemTableSize: 256 << 10})
			require.NoError(t, err)
			q, err := queue.Open(db, "q", &queue.Options[int]{MaxAttempts: -1})
			require.NoError(t, err)
			var leased []queue.ID
			abort := errors.New("abort")
			for i := range 600 + rng.IntN(600) {
				switch r := rng.IntN(10); {
				case r < 6:
					vals := make([]int, 1+rng.IntN(20))
					err := db.Update(func(b *tipkv.Batch) error {
						if _, err := q.Enqueue(b, vals...); err != nil {
							return err
						}
						if rng.IntN(8) == 0 {
							return abort
						}
						return nil
					})
					if !errors.Is(err, abort) {
						require.NoError(t, err, "step %d", i)
					}
				case r < 8:
					ms, err := q.Receive(1+rng.IntN(30), time.Hour)
					require.NoError(t, err)
					for _, m := range ms {
						leased = append(leased, m.ID)
					}
					rng.Shuffle(len(leased), func(i, j int) { leased[i], leased[j] = leased[j], leased[i] })
					n := rng.IntN(len(leased) + 1)
					require.NoError(t, q.Ack(db, leased[:n]...))
					leased = leased[n:]
				default:
					_, err := q.Pop(1 + rng.IntN(10))
					require.NoError(t, err)
				}
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
			require.NoError(t, db.Close())

			db, err = openFS("db", crashed, &tipkv.Options{NoSync: noSync})
			require.NoError(t, err)
			defer db.Close()
			q, err = queue.Open(db, "q", &queue.Options[int]{MaxAttempts: -1})
			require.NoError(t, err)
			ms, err := q.Peek(1 << 30)
			require.NoError(t, err)
			require.Equal(t, len(ms), q.Len(), "the count after the crash (noSync=%v)", noSync)
			s, err := link.StoreOf(db)
			require.NoError(t, err)
			require.NoError(t, check.Store(s, check.Options{}).Err())
			// And it goes on counting right.
			_, err = q.Enqueue(db, 1, 2, 3)
			require.NoError(t, err)
			got, err := q.Pop(5)
			require.NoError(t, err)
			require.Equal(t, len(ms)+3-len(got), q.Len())
		})
	}
}
