package crash_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// gmsg is a message of TestCrashQueueGroupsInOrder: the i-th message of
// its group.
type gmsg struct {
	G string `msgpack:"g"`
	I int    `msgpack:"i"`
}

// Message groups across a crash: a producer enqueues the messages of 4
// groups (window 1), each group's numbered from 0, while two consumers
// receive them and, in one Update each, acknowledge them and append
// each to its group's feed stream; some releases make messages come back.
// The store is cloned as a crash would leave it at a random moment.
// Reopened, each group's feed holds its messages 0..k-1 in order (an
// acknowledgement never passed an older message of its group), and the
// queue delivers the rest of each group from k on, in order, none
// missing up to the last enqueue that returned before the crash.
func TestCrashQueueGroupsInOrder(t *testing.T) {
	groups := []string{"a", "b", "c", "d"}
	for _, seed := range testutil.CrashSeeds(t, 8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/crash -run 'TestCrashQueueGroupsInOrder' -crash.seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 0x27))
			fs := vfs.NewCrashableMem()
			db, err := openFS("db", fs, &tipkv.Options{MemTableSize: 256 << 10})
			require.NoError(t, err)
			q, err := queue.Open[gmsg](db, "q", &queue.Options[gmsg]{MaxAttempts: -1})
			require.NoError(t, err)
			feed, err := versioned.NewFeed[gmsg](db, nil)
			require.NoError(t, err)

			total := 200 + rng.IntN(400)
			crashAt := int64(rng.IntN(total))
			var (
				enqueued [4]atomic.Int64 // per group: messages whose enqueue returned
				acked    atomic.Int64
				crashed  *vfs.MemFS
				snap     [4]int64
				once     sync.Once
				stop     atomic.Bool
				wg       sync.WaitGroup
			)
			crash := func() {
				once.Do(func() {
					for i := range snap {
						snap[i] = enqueued[i].Load() // before the clone: returned, so durable
					}
					crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(seed, 7))})
				})
			}
			wg.Add(1)
			go func() { // the producer
				defer wg.Done()
				prng := rand.New(rand.NewPCG(seed, 1))
				for range total {
					g := prng.IntN(len(groups))
					i := int(enqueued[g].Load())
					_, err := q.EnqueueWith(db, queue.EnqueueOptions{Group: groups[g]}, gmsg{G: groups[g], I: i})
					if err != nil {
						t.Error(err)
						return
					}
					enqueued[g].Add(1)
				}
			}()
			for c := range 2 {
				wg.Add(1)
				go func() { // a consumer
					defer wg.Done()
					crng := rand.New(rand.NewPCG(seed, uint64(10+c)))
					for !stop.Load() {
						ms, err := q.Receive(1+crng.IntN(4), time.Hour)
						if err != nil {
							t.Error(err)
							return
						}
						if len(ms) == 0 {
							time.Sleep(100 * time.Microsecond) // the producer's turn
							continue
						}
						if crng.IntN(5) == 0 {
							if err := q.Release(ms[0].ID, 0); err != nil {
								t.Error(err)
								return
							}
							ms = ms[1:]
						}
						err = db.Update(func(b *tipkv.Batch) error {
							for _, m := range ms {
								if err := q.Ack(b, m.ID); err != nil {
									return err
								}
								if _, err := feed.Append(b, "acked-"+m.Group, m.Value); err != nil {
									return err
								}
							}
							return nil
						})
						if err != nil {
							t.Error(err)
							return
						}
						if acked.Add(int64(len(ms))) >= crashAt {
							crash()
						}
					}
				}()
			}
			// The consumers stop once everything enqueued was acknowledged.
			for acked.Load() < int64(total) && !t.Failed() {
				time.Sleep(time.Millisecond)
			}
			stop.Store(true)
			wg.Wait()
			crash()
			require.NoError(t, db.Close())
			require.False(t, t.Failed())

			db, err = openFS("db", crashed, nil)
			require.NoError(t, err)
			defer db.Close()
			q, err = queue.Open[gmsg](db, "q", &queue.Options[gmsg]{MaxAttempts: -1})
			require.NoError(t, err)
			feed, err = versioned.NewFeed[gmsg](db, nil)
			require.NoError(t, err)
			got := map[string][]int{}
			for _, g := range groups {
				for e, err := range feed.Newest("acked-"+g, tipkv.Query{}) {
					require.NoError(t, err)
					got[g] = append(got[g], e.Value.I)
				}
				slices.Reverse(got[g])
			}
			for {
				ms, err := q.Receive(10, time.Hour)
				require.NoError(t, err)
				if len(ms) == 0 {
					break
				}
				for _, m := range ms {
					got[m.Group] = append(got[m.Group], m.Value.I)
				}
				require.NoError(t, q.Ack(db, qIDs(ms)...))
			}
			for gi, g := range groups {
				for i, v := range got[g] {
					require.Equal(t, i, v, "group %s: acknowledged, then delivered after the crash: %v", g, got[g])
				}
				require.GreaterOrEqual(t, len(got[g]), int(snap[gi]), "group %s: an enqueue that returned before the crash is lost", g)
			}
		})
	}
}

func qIDs[T any](ms []queue.Message[T]) []queue.ID {
	ids := make([]queue.ID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}
