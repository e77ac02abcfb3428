package versioned_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// What each read costs the engine: seeks (through versioned.WrapIters),
// bloom filter checks, and the size hints remote engines get.

// LatestAll is a skip-scan: one positioning call per document, whatever
// the number of versions, and no Next over older versions.
func TestLatestAllSeeksOncePerDocument(t *testing.T) {
	for _, versions := range []int{1, 50} {
		t.Run(fmt.Sprintf("versions=%d", versions), func(t *testing.T) {
			db, users := openUsers(t)
			for i := range 40 {
				putN(t, users, db, fmt.Sprintf("d%02d", i), versions)
			}
			require.NoError(t, db.Flush())
			var c seekCounter
			defer versioned.WrapIters(c.wrap)()
			docs := testutil.Collect(t, users.LatestAll(tipkv.Query{}))
			require.Len(t, docs, 40)
			require.Equal(t, int64(41), c.seeks.Load(), "First, then one NextPrefix per document")
			require.Zero(t, c.nexts.Load())
		})
	}
}

// Latest, AsOf and History are one seek each; History then steps forward.
// Count is two seeks, LatestMany one per distinct id.
func TestPointReadsSeekOnce(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "a", 20)
	putN(t, users, db, "b", 2)
	var c seekCounter
	defer versioned.WrapIters(c.wrap)()

	_, err := users.Latest("a")
	require.NoError(t, err)
	_, err = users.AsOf("a", 7)
	require.NoError(t, err)
	_, err = users.Latest("missing")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	// Latest of "a", which this DB wrote, is a point Get of the key its
	// version cache knows: no seek.
	require.Equal(t, int64(2), c.seeks.Load())
	require.Zero(t, c.nexts.Load())

	require.Len(t, testutil.Collect(t, users.History("a", tipkv.Query{Limit: 5})), 5)
	require.Equal(t, int64(3), c.seeks.Load())
	require.Equal(t, int64(4), c.nexts.Load(), "a page of 5 is one seek and 4 steps")

	c.seeks.Store(0)
	c.nexts.Store(0)
	n, err := users.Count("a")
	require.NoError(t, err)
	require.Equal(t, int64(20), n)
	require.Equal(t, int64(2), c.seeks.Load(), "Count: the newest and the oldest")
	docs, err := users.LatestMany("b", "missing", "a", "b")
	require.NoError(t, err)
	require.Equal(t, []int64{2, 0, 20, 2}, versionsOf(docs))
	require.Equal(t, int64(5), c.seeks.Load(), "LatestMany: one seek per distinct id")
	require.Zero(t, c.nexts.Load())
}

// Collections and Streams seek once per name, however many keys each
// holds.
func TestNamesSeekOncePerName(t *testing.T) {
	db := testutil.OpenMem(t)
	for i, name := range []string{"a", "b", "c"} {
		c, err := versioned.NewCollection[int](db, name, nil)
		require.NoError(t, err)
		for d := range 1 + i*30 {
			_, err := c.Put(db, fmt.Sprint("doc", d), d)
			require.NoError(t, err)
		}
	}
	require.NoError(t, db.Flush())
	var c seekCounter
	defer versioned.WrapIters(c.wrap)()
	require.Equal(t, []string{"a", "b", "c"}, testutil.Collect(t, versioned.Collections(db)))
	require.Equal(t, int64(4), c.seeks.Load(), "First, then one seek per name")
	require.Zero(t, c.nexts.Load())
}

// The Latest of a document that never existed is answered by the bloom
// filters once the data is in tables.
func TestMissingLatestHitsBloomFilter(t *testing.T) {
	db, users := openUsers(t)
	for i := range 1000 {
		_, err := users.Put(db, fmt.Sprintf("doc-%04d", i), user{Age: i})
		require.NoError(t, err)
	}
	require.NoError(t, db.Flush())

	hits0, misses0 := filterStats(t, db)
	for i := range 200 {
		_, err := users.Latest(fmt.Sprintf("absent-%04d", i))
		require.ErrorIs(t, err, tipkv.ErrNotFound)
	}
	hits1, misses1 := filterStats(t, db)
	t.Logf("200 missing documents: %d filter hits, %d misses", hits1-hits0, misses1-misses0)
	require.GreaterOrEqual(t, hits1-hits0, int64(190), "at most a few false positives (10 bits per key)")

	for i := range 200 {
		_, err := users.Latest(fmt.Sprintf("doc-%04d", i))
		require.NoError(t, err)
	}
	hits2, misses2 := filterStats(t, db)
	t.Logf("200 present documents: %d filter hits, %d misses", hits2-hits1, misses2-misses1)
	require.GreaterOrEqual(t, misses2-misses1, int64(200), "a present document passes the filter")
}

// sizerStore is an engine that wants size hints (engine.Sizer), as etcd
// and SQL do; it records them.
type sizerStore struct {
	engine.Store
	mu    sync.Mutex
	hints []int
}

func (s *sizerStore) NewIterN(lo, hi []byte, n int) (engine.Iter, error) {
	s.mu.Lock()
	s.hints = append(s.hints, n)
	s.mu.Unlock()
	return s.Store.NewIter(lo, hi)
}

func (s *sizerStore) take() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hints
	s.hints = nil
	return h
}

// Every read tells an engine that reads in pages how many keys it wants,
// so that etcd and SQL answer it in one request: 1 for a point read or a
// skip-scan's seeks, one more than the limit for a limited scan (the page
// then shows whether the range goes on), and nothing for an unlimited one.
func TestReadsGiveSizeHints(t *testing.T) {
	ps, err := pebblestore.Open("hints", pebblestore.Config{InMemory: true, CacheSize: 8 << 20, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, err)
	s := &sizerStore{Store: ps}
	db, err := tipkv.OpenEngine(s, "hints", nil)
	require.NoError(t, err)
	defer db.Close()
	users := newUsers(t, db)
	putN(t, users, db, "a", 10)
	clock := testutil.NewClock(t0)
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now})
	require.NoError(t, err)
	for range 5 {
		clock.Set(clock.Now().Add(time.Second))
		_, err := f.Append(db, "s", click{})
		require.NoError(t, err)
	}
	s.take()

	for name, tc := range map[string]struct {
		read func() error
		want []int
	}{
		"Latest":          {func() error { _, err := users.Latest("a"); return err }, nil}, // known: a point Get
		"Latest unknown":  {func() error { _, err := users.Latest("b"); return ignoreNotFound(err) }, []int{1}},
		"AsOf":            {func() error { _, err := users.AsOf("a", 3); return err }, []int{1}},
		"Count":           {func() error { _, err := users.Count("a"); return err }, []int{1}},
		"LatestMany":      {func() error { _, err := users.LatestMany("a", "b"); return err }, []int{1}},
		"History limit 4": {func() error { return testutil.ReadErr(t, users.History("a", tipkv.Query{Limit: 4})) }, []int{5}},
		"History":         {func() error { return testutil.ReadErr(t, users.History("a", tipkv.Query{})) }, nil}, // no hint: a plain NewIter
		"HistoryPage 3":   {func() error { _, _, err := users.HistoryPage("a", tipkv.Query{Limit: 3}); return err }, []int{5}},
		"LatestAll":       {func() error { return testutil.ReadErr(t, users.LatestAll(tipkv.Query{Limit: 7})) }, []int{1}},
		"Collections":     {func() error { return testutil.ReadErr(t, versioned.Collections(db)) }, []int{1}},
		"Newest limit 2":  {func() error { return testutil.ReadErr(t, f.Newest("s", tipkv.Query{Limit: 2})) }, []int{3}},
		// The stream's oldest position (once per DB), its keep+1 newest,
		// then up to knobs.Versioned.DropRangeMin events to drop.
		"Trim keep 2":      {func() error { return f.Trim(db, "s", 2) }, []int{1, 4, 33}},
		"Put of a new doc": {func() error { _, err := users.Put(db, "new", user{}); return err }, []int{1}},
	} {
		require.NoError(t, tc.read(), name)
		require.Equal(t, tc.want, s.take(), name)
	}
}

// On a shared engine a write reads only what it has no hint of: a Put or
// Delete of a document this handle wrote reads nothing, a PutIf reads
// nothing when its version agrees with the hint or there is none, and an
// Append reads its stream's last position once.
func TestSharedWritesReadOnlyWithoutAHint(t *testing.T) {
	db := openShared(t)
	users := newUsers(t, db)
	var c seekCounter
	defer versioned.WrapIters(c.wrap)()
	step := func(name string, wantSeeks int64, f func() error) {
		t.Helper()
		c.seeks.Store(0)
		require.NoError(t, f(), name)
		require.Equal(t, wantSeeks, c.seeks.Load(), name)
	}
	step("Put of a document never seen", 1, func() error { _, err := users.Put(db, "a", user{}); return err })
	step("Put with a hint", 0, func() error { _, err := users.Put(db, "a", user{}); return err })
	step("PutIf that agrees with the hint", 0, func() error { _, err := users.PutIf(db, "a", user{}, 2); return err })
	step("PutIf with no hint", 0, func() error { _, err := users.PutIf(db, "b", user{}, 0); return err })
	step("Delete with a hint", 0, func() error { _, err := users.Delete(db, "a"); return err })
	step("Delete of a deleted document", 0, func() error { _, err := users.Delete(db, "a"); return err })
	step("Prune with hints", 0, func() error { _, err := users.Prune(db, "a", 1); return err })
	step("Put after a Prune", 0, func() error { _, err := users.Put(db, "a", user{}); return err })
	step("PutIf that disagrees with the hint", 1, func() error {
		_, err := users.PutIf(db, "a", user{}, 1)
		if !errors.Is(err, tipkv.ErrConflict) {
			return fmt.Errorf("want a conflict, got %v", err)
		}
		return nil
	})
	step("PutIf of a version a document never seen lacks", 1, func() error {
		// No read at first; its guard fails at commit, and the rerun
		// reads to answer the conflict.
		_, err := users.PutIf(db, "c", user{}, 3)
		if !errors.Is(err, tipkv.ErrConflict) {
			return fmt.Errorf("want a conflict, got %v", err)
		}
		return nil
	})

	f, err := versioned.NewFeed[click](db, nil)
	require.NoError(t, err)
	step("first Append", 1, func() error { _, err := f.Append(db, "s", click{}); return err })
	step("next Append", 0, func() error { _, err := f.Append(db, "s", click{}); return err })
	// One read finds the events to drop, one the groups' cursors that
	// hold them back, one the stream's newest event (a trim that drops
	// it stores the stream's trim mark: feed_mark.go).
	step("TrimBefore", 3, func() error { return f.TrimBefore(db, "s", time.Now().Add(time.Hour)) })
}

func ignoreNotFound(err error) error {
	if errors.Is(err, tipkv.ErrNotFound) {
		return nil
	}
	return err
}
