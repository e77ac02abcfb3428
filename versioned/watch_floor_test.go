package versioned_test

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// pointsCounter records the most point keys, tombstones included, that one
// iterator stepped on (read from Pebble's stats when it closes) while on
// is set.
type pointsCounter struct {
	mu  sync.Mutex
	on  bool
	max uint64
}

func (c *pointsCounter) wrap(it engine.Iter) engine.Iter { return &pointsIter{Iter: it, c: c} }

func (c *pointsCounter) start() {
	c.mu.Lock()
	c.on, c.max = true, 0
	c.mu.Unlock()
}

func (c *pointsCounter) most() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}

type pointsIter struct {
	engine.Iter
	c *pointsCounter
}

func (i *pointsIter) Close() error {
	if pr, ok := i.Iter.(interface{ PointsRead() uint64 }); ok {
		n := pr.PointsRead()
		i.c.mu.Lock()
		if i.c.on {
			i.c.max = max(i.c.max, n)
		}
		i.c.mu.Unlock()
	}
	return i.Iter.Close()
}

// watchLockStep writes n versions of document "doc" of c one at a time,
// each Put waiting until w delivered it, checks that w delivers every
// version once and in order (a ChangePrune between them, with KeepVersions,
// says where the kept versions start), and calls round(i) before the i-th
// Put.
func watchLockStep(tb testing.TB, c *versioned.Collection[[]byte], db *tipkv.DB, next func() (versioned.Change[[]byte], error, bool), n int, round func(i int)) {
	tb.Helper()
	val := make([]byte, 100)
	var want int64 = 1
	for i := range n {
		if round != nil {
			round(i)
		}
		v, err := c.Put(db, "doc", val)
		if err != nil {
			tb.Fatal(err)
		}
		for {
			ch, err, ok := next()
			if !ok || err != nil {
				tb.Fatalf("Watch ended at version %d: %v", want, err)
			}
			if ch.Kind == versioned.ChangePrune {
				continue
			}
			if ch.Kind != versioned.ChangePut || ch.Doc.Version != want {
				tb.Fatalf("Watch delivered %v version %d, want put version %d", ch.Kind, ch.Doc.Version, want)
			}
			want++
			break
		}
		if v != want-1 {
			tb.Fatalf("Put wrote version %d, Watch delivered %d", v, want-1)
		}
	}
}

// startWatch watches document "doc" of c from its first version until
// stop is called or the test ends.
func startWatch(tb testing.TB, c *versioned.Collection[[]byte]) (next func() (versioned.Change[[]byte], error, bool), stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	next, stopPull := iter.Pull2(c.Watch(ctx, "doc", 0))
	stop = func() { cancel(); stopPull() }
	tb.Cleanup(stop)
	return next, stop
}

// TestWatchSkipsDroppedVersions is issue 30's defect without a clock: with
// KeepVersions, every Put drops the oldest version, and a watcher that
// found the oldest version by walking back from the end of the
// document's range stepped on the tombstone of every version dropped
// since the memtable's last flush, so a wake-up cost grew with the
// document's history (162-389 us against 15 us a Put and its delivery
// after 3,000 Puts). Each wake-up now reads through a range whose floor is
// the oldest version it saw last: after 2,000 Puts that kept 4 versions
// no iterator steps on more than a few dozen keys. The whole-range
// variant (the old read, kept behind a knob) shows that the count sees
// the tombstones: there one iterator steps on about 2,000.
func TestWatchSkipsDroppedVersions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		whole     bool
		atLeast   uint64
		atMost    uint64
		keep, put int
	}{
		{name: "floor", keep: 4, put: 2_000, atMost: 64},
		{name: "whole", whole: true, keep: 4, put: 2_000, atLeast: 1_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer versioned.SetWatchWholeRange(tc.whole)()
			var pc pointsCounter
			defer versioned.WrapIters(pc.wrap)()
			db, _ := testutil.OpenDir(t, &tipkv.Options{NoSync: true})
			c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}, KeepVersions: tc.keep})
			require.NoError(t, err)
			next, _ := startWatch(t, c)
			watchLockStep(t, c, db, next, tc.put, func(i int) {
				if i == tc.put-100 {
					pc.start()
				}
			})
			got := pc.most()
			t.Logf("most points one iterator stepped on over the last 100 Puts: %d", got)
			if tc.atMost > 0 {
				require.LessOrEqual(t, got, tc.atMost)
			}
			require.GreaterOrEqual(t, got, tc.atLeast)
			require.NoError(t, db.Close()) // before the knobs are restored
		})
	}
}

// TestWatchFloorSeesPurge: a watcher that reads from a floor (the oldest
// version it saw) still finds the oldest version when a Purge and new
// versions, in one batch, put versions below that floor: it reports the
// Purge and delivers the new versions from 1, as it did when it read the
// whole range. Had it not read the whole range again on finding version
// 7, under its floor, it would have taken 8 for the oldest version and
// reported 1 to 7 pruned.
func TestWatchFloorSeesPurge(t *testing.T) {
	db, _ := testutil.OpenDir(t, &tipkv.Options{NoSync: true})
	c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	next, _ := startWatch(t, c)
	watchLockStep(t, c, db, next, 10, nil)
	_, err = c.Prune(db, "doc", 3)
	require.NoError(t, err)
	ch, err, ok := next()
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, versioned.Change[[]byte]{Kind: versioned.ChangePrune, Oldest: 8}, ch)

	val := make([]byte, 100) // watchLockStep's value
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		if _, err := c.Purge(b, "doc"); err != nil {
			return err
		}
		for range 12 {
			if _, err := c.Put(b, "doc", val); err != nil {
				return err
			}
		}
		return nil
	}))
	var got []string
	for len(got) == 0 || got[len(got)-1] != "put 12" {
		ch, err, ok := next()
		require.True(t, ok)
		require.NoError(t, err)
		got = append(got, fmt.Sprint(ch.Kind, " ", ch.Doc.Version+ch.Oldest))
	}
	want := []string{"purge 0"}
	for v := 1; v <= 12; v++ {
		want = append(want, fmt.Sprint("put ", v))
	}
	require.Equal(t, want, got)
}
