package versioned_test

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// heapAfter returns how much the Go heap grew while fill ran, measured
// after a GC on each side.
func heapAfter(fill func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fill()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// The feed's memory is bounded: after 1,000,000 distinct one-event
// streams the Go heap has grown at most 2x what 1,000,000 distinct
// one-version documents grow it (issue 12: it was +369 MiB). Each side
// runs on a fresh in-memory store, NoSync, and keeps its DB open while
// the heap is read.
func TestFeedMemoryBounded(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("1,000,000 writes of each kind, a minute without the race detector")
	}
	const n = 1_000_000
	open := func() *tipkv.DB {
		db, err := tipkv.Open("", &tipkv.Options{InMemory: true, NoSync: true})
		require.NoError(t, err)
		return db
	}
	var docs, feed int64
	{
		db := open()
		c, err := versioned.NewCollection[click](db, "c", nil)
		require.NoError(t, err)
		docs = heapAfter(func() {
			for i := range n {
				_, err := c.Put(db, strconv.Itoa(i), click{"x"})
				require.NoError(t, err)
			}
		})
		require.NoError(t, db.Close())
	}
	{
		db := open()
		f, err := versioned.NewFeed[click](db, nil)
		require.NoError(t, err)
		feed = heapAfter(func() {
			for i := range n {
				_, err := f.Append(db, strconv.Itoa(i), click{"x"})
				require.NoError(t, err)
			}
		})
		require.NoError(t, db.Close())
	}
	t.Logf("Go heap after %d distinct documents: %+.1f MiB; after %d distinct streams: %+.1f MiB (%.2fx)",
		n, float64(docs)/(1<<20), n, float64(feed)/(1<<20), float64(feed)/float64(max(docs, 1)))
	require.LessOrEqual(t, feed, 2*max(docs, 1<<20), "feed heap within 2x the documents' (or 2 MiB)")
}
