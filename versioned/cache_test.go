package versioned_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// CacheEntries makes the version cache remember that many documents: a Put
// of each of them again reads nothing (no seek), where the default cache
// would have forgotten most. It also prints the Go heap one entry costs,
// the figure the option's doc states.
func TestVersionCacheEntryCost(t *testing.T) {
	const n = 100_000
	db := testutil.OpenMem(t)
	_, err := versioned.NewCollection[int](db, "bad", &versioned.Options[int]{CacheEntries: -1})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	c, err := versioned.NewCollection[int](db, "c", &versioned.Options[int]{CacheEntries: 2 * n})
	require.NoError(t, err)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("document-%07d", i) // 16 bytes
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, id := range ids {
		_, err := c.Put(db, id, 1)
		require.NoError(t, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("version cache: %.0f bytes of Go heap per document", float64(after.HeapAlloc-before.HeapAlloc)/n)

	var sc seekCounter
	defer versioned.WrapIters(sc.wrap)()
	for _, id := range ids {
		v, err := c.Put(db, id, 2)
		require.NoError(t, err)
		require.Equal(t, int64(2), v)
	}
	require.Zero(t, sc.seeks.Load(), "every document remembered: no Put read")
	runtime.KeepAlive(ids)
}
