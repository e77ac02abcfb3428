package versioned_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// valueCached opens a collection with a value cache and a second handle on
// the same collection without one, whose Latest reads the store.
func valueCached(t *testing.T, db *tipkv.DB, opts versioned.Options[string]) (cached, plain *versioned.Collection[string]) {
	t.Helper()
	o := opts
	o.ValueCache = 1 << 20
	cached, err := versioned.NewCollection(db, "docs", &o)
	require.NoError(t, err)
	plain, err = versioned.NewCollection(db, "docs", &opts)
	require.NoError(t, err)
	return cached, plain
}

// sameLatest fails unless both handles answer Latest of id alike.
func sameLatest(t *testing.T, cached, plain *versioned.Collection[string], id string) {
	t.Helper()
	want, wantErr := plain.Latest(id)
	got, gotErr := cached.Latest(id)
	require.Equal(t, wantErr == nil, gotErr == nil, "%s: cached %v, store %v", id, gotErr, wantErr)
	if wantErr != nil {
		require.Equal(t, wantErr.Error(), gotErr.Error())
		return
	}
	require.Equal(t, want.Version, got.Version, id)
	require.Equal(t, want.Value, got.Value, id)
	require.Equal(t, want.Time, got.Time, id)
}

// A purged document starts again at version 1: the cached value of the
// old version 1 must not answer for the new one.
func TestValueCacheAfterPurgeNumbersComeBack(t *testing.T) {
	db := testutil.OpenMem(t)
	cached, plain := valueCached(t, db, versioned.Options[string]{})
	_, err := cached.Put(db, "a", "first life")
	require.NoError(t, err)
	for range 2 { // a fill, then a hit
		d, err := cached.Latest("a")
		require.NoError(t, err)
		require.Equal(t, "first life", d.Value)
	}
	_, err = plain.Purge(db, "a")
	require.NoError(t, err)
	_, err = cached.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	v, err := plain.Put(db, "a", "second life")
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
	d, err := cached.Latest("a")
	require.NoError(t, err)
	require.Equal(t, "second life", d.Value)
}

// Every write path, through either handle, against a store read after
// each step: the cached handle answers what the store holds.
func TestValueCacheModel(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	cached, plain := valueCached(t, db, versioned.Options[string]{KeepVersions: 3})
	ttl, err := versioned.NewCollection(db, "docs", &versioned.Options[string]{TTL: time.Minute, PurgeInterval: -1})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(7, 7))
	ids := []string{"a", "b", "c", "d"}
	for step := range 3000 {
		id := ids[rng.IntN(len(ids))]
		w := []*versioned.Collection[string]{cached, plain}[rng.IntN(2)]
		val := fmt.Sprintf("%s-%d", id, step)
		switch rng.IntN(9) {
		case 0, 1:
			_, err = w.Put(db, id, val)
		case 2:
			_, err = ttl.Put(db, id, val) // expires a minute later
		case 3:
			latest, _ := plain.Latest(id)
			_, err = w.PutIf(db, id, val, latest.Version)
		case 4:
			_, err = w.Delete(db, id)
		case 5:
			_, err = w.Purge(db, id)
		case 6:
			_, err = w.Prune(db, id, 1)
		case 7:
			mu.Lock()
			now = now.Add(time.Duration(rng.IntN(90)) * time.Second)
			mu.Unlock()
		case 8:
			_, err = ttl.PurgeExpired(t.Context())
		}
		if err != nil {
			require.ErrorIs(t, err, tipkv.ErrConflict, "step %d", step) // a PutIf that lost
		}
		for _, id := range ids {
			sameLatest(t, cached, plain, id)
		}
	}
}

// Readers of the cached handle against writers that purge and write again
// (so version numbers come back with other values): a reader never sees a
// document's value go back to an earlier life, and never a value that is
// not the version it came with.
func TestValueCacheUnderRacingPurges(t *testing.T) {
	db := testutil.OpenMem(t)
	cached, plain := valueCached(t, db, versioned.Options[string]{})
	const lives = 300
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for life := range lives {
			for v := 1; v <= 3; v++ {
				got, err := plain.Put(db, "doc", fmt.Sprintf("%d/%d", life, v))
				if err != nil || got != int64(v) {
					t.Errorf("life %d: Put got version %d, %v; want %d", life, got, err, v)
					return
				}
			}
			if _, err := plain.Purge(db, "doc"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := -1
			for {
				select {
				case <-done:
					return
				default:
				}
				d, err := cached.Latest("doc")
				if err != nil {
					continue // purged at the moment
				}
				var life, v int
				if _, err := fmt.Sscanf(d.Value, "%d/%d", &life, &v); err != nil {
					t.Errorf("value %q: %v", d.Value, err)
					return
				}
				if int64(v) != d.Version || life < last {
					t.Errorf("read %q as version %d after life %d", d.Value, d.Version, last)
					return
				}
				last = life
			}
		}()
	}
	wg.Wait()
}

// The cache is bounded: filling it with many more documents than fit keeps
// every answer right (the dropped generation is read from the store again).
func TestValueCacheBounded(t *testing.T) {
	db := testutil.OpenMem(t)
	c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}, ValueCache: 64 << 10})
	require.NoError(t, err)
	val := make([]byte, 1000)
	for i := range 1000 {
		val[0], val[1] = byte(i), byte(i>>8)
		_, err := c.Put(db, fmt.Sprint(i), val)
		require.NoError(t, err)
	}
	for round := range 2 {
		for i := range 1000 {
			d, err := c.Latest(fmt.Sprint(i))
			require.NoError(t, err, "round %d", round)
			require.Equal(t, []byte{byte(i), byte(i >> 8)}, d.Value[:2])
		}
	}
}

func TestValueCacheNegative(t *testing.T) {
	db := testutil.OpenMem(t)
	_, err := versioned.NewCollection(db, "docs", &versioned.Options[string]{ValueCache: -1})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}
