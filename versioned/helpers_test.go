package versioned_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

type user struct {
	Name string `msgpack:"name"`
	Age  int    `msgpack:"age"`
}

func newUsers(t testing.TB, db *tipkv.DB) *versioned.Collection[user] {
	t.Helper()
	c, err := versioned.NewCollection[user](db, "users", nil)
	require.NoError(t, err)
	return c
}

func openUsers(t testing.TB) (*tipkv.DB, *versioned.Collection[user]) {
	t.Helper()
	db := testutil.OpenMem(t)
	return db, newUsers(t, db)
}

// openShared opens a DB that declares a shared engine (one handle of
// sharedstore): the shared-mode code paths, on Pebble.
func openShared(t testing.TB) *tipkv.DB {
	t.Helper()
	return testutil.OpenShared(t, 1, sharedstore.Options{}, nil)[0]
}

type click struct {
	Page string `msgpack:"page"`
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func openFeed(t testing.TB) (*tipkv.DB, *versioned.Feed[click], *testutil.Clock) {
	t.Helper()
	db := testutil.OpenMem(t)
	clock := testutil.NewClock(t0)
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now})
	require.NoError(t, err)
	return db, f, clock
}

func versionsOf(docs []versioned.Doc[user]) []int64 {
	var out []int64
	for _, d := range docs {
		out = append(out, d.Version)
	}
	return out
}

// putN writes versions until the document has n more.
func putN(t testing.TB, c *versioned.Collection[user], w tipkv.Writer, id string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := c.Put(w, id, user{Name: id, Age: i})
		require.NoError(t, err)
	}
}

// filterStats reads the bloom filter counters of db's store.
func filterStats(t testing.TB, db *tipkv.DB) (hits, misses int64) {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	fs, ok := s.(interface{ FilterStats() (int64, int64) })
	require.True(t, ok, "the store exposes no filter stats")
	return fs.FilterStats()
}

// seekCounter counts the positioning calls of the iterators it wraps.
type seekCounter struct {
	seeks, nexts atomic.Int64
}

func (c *seekCounter) wrap(it engine.Iter) engine.Iter { return &countingIter{Iter: it, c: c} }

type countingIter struct {
	engine.Iter
	c *seekCounter
}

func (i *countingIter) SeekGE(k []byte) bool       { i.c.seeks.Add(1); return i.Iter.SeekGE(k) }
func (i *countingIter) SeekPrefixGE(k []byte) bool { i.c.seeks.Add(1); return i.Iter.SeekPrefixGE(k) }
func (i *countingIter) First() bool                { i.c.seeks.Add(1); return i.Iter.First() }
func (i *countingIter) Last() bool                 { i.c.seeks.Add(1); return i.Iter.Last() }
func (i *countingIter) NextPrefix() bool           { i.c.seeks.Add(1); return i.Iter.NextPrefix() }
func (i *countingIter) Next() bool                 { i.c.nexts.Add(1); return i.Iter.Next() }
