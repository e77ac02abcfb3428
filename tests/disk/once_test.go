package disk_test

import (
	"context"

	"encoding/hex"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// Windowed idempotency keys keep the disk bounded however many are
// written: each round enqueues messages under new keys with a one-minute
// window and consumes them (the messages go at once), the clock moves a
// minute, and a sweep (as the background pass would) deletes the keys
// whose window ended. The store's tables after the last round stay a
// small multiple of one round's keys (each key is held twice, by its
// record and by its place in the due order, and deleted ones wait for a
// compaction), whatever the number of rounds. Sizes are read once the
// store has no flush or compaction running.
func TestOnceKeysKeepDiskBounded(t *testing.T) {
	rounds, perRound, keySize := 40, 4096, 256
	if testutil.RaceEnabled || testing.Short() {
		rounds = 12
	}
	clock := &onceClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	db, err := tipkv.Open(t.TempDir(), &tipkv.Options{NoSync: true, MemTableSize: 2 << 20, Clock: clock.Now})
	require.NoError(t, err)
	defer db.Close()
	q, err := queue.Open[int](db, "jobs", nil)
	require.NoError(t, err)
	// Random keys, so that compression does not hide what they take.
	rng := rand.New(rand.NewPCG(1, 2))
	key := func() string {
		b := make([]byte, keySize/2)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return hex.EncodeToString(b)
	}
	round := uint64(perRound * keySize)
	var lastData uint64
	var sizes []uint64
	for r := range rounds {
		require.NoError(t, db.Update(func(b *tipkv.Batch) error {
			for i := range perRound {
				if _, _, err := q.EnqueueOnce(b, key(), tipkv.Window(time.Minute), i); err != nil {
					return err
				}
			}
			return nil
		}))
		for {
			ms, err := q.Pop(1000)
			require.NoError(t, err)
			if len(ms) == 0 {
				break
			}
		}
		clock.Advance(time.Minute)
		st, err := db.SweepKeys(context.Background())
		require.NoError(t, err)
		require.Equal(t, perRound, st.Windowed, "round %d", r)
		total, data := settledDiskUsage(t, db)
		sizes, lastData = append(sizes, total), data
	}
	last := sizes[len(sizes)-1]
	t.Logf("one round's keys %d KiB, %d rounds, tables after the last %d KiB, disk after each round (KiB): %v",
		round>>10, rounds, lastData>>10, kib(sizes))
	require.Less(t, lastData, 10*round, "the tables hold a few rounds' keys, not all of them")
	require.Less(t, last-lastData, maxWAL(2<<20), "the write-ahead log's preallocated files")
	half := len(sizes) / 2
	require.LessOrEqual(t, slices.Max(sizes[half:]), 2*slices.Max(sizes[1:half]), "the disk does not grow with the rounds")
}

type onceClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *onceClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *onceClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
