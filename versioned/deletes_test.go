package versioned_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// How drops are written on Pebble (exclusive): short spans with point
// deletes, long ones with one range delete, each starting where the last
// drop ended so that no two tombstones ever cover one key. What is dropped
// is tested on every engine in internal/tipkvtest.

// deleteLog records the deletes the package writes, decoded as the
// [lo, hi] versions or positions they cover, with whether each was a range
// delete.
type deleteLog struct {
	spans  [][2]int64
	ranges []bool
}

func traceDeletes(t *testing.T) *deleteLog {
	l := &deleteLog{}
	restore := versioned.TraceDeletes(func(lo, hi []byte) {
		a, _, err := codec.DecodeDesc(lo[len(lo)-codec.NumberSize:])
		require.NoError(t, err)
		if hi == nil {
			l.spans = append(l.spans, [2]int64{a, a})
			l.ranges = append(l.ranges, false)
			return
		}
		b, _, err := codec.DecodeDesc(hi[len(hi)-codec.NumberSize:])
		require.NoError(t, err)
		// [desc(a), desc(b)) covers the numbers (b, a].
		l.spans = append(l.spans, [2]int64{b + 1, a})
		l.ranges = append(l.ranges, true)
	})
	t.Cleanup(restore)
	return l
}

// runs merges the spans into runs of consecutive numbers, in the order
// they were written: what the deletes covered, however they were split.
func (l *deleteLog) runs() [][2]int64 {
	var out [][2]int64
	for _, s := range l.spans {
		if n := len(out); n > 0 && out[n-1][1]+1 == s[0] {
			out[n-1][1] = s[1]
			continue
		}
		out = append(out, s)
	}
	return out
}

// rangeCount is how many range deletes were written.
func (l *deleteLog) rangeCount() int {
	n := 0
	for _, r := range l.ranges {
		if r {
			n++
		}
	}
	return n
}

func (l *deleteLog) requireDisjoint(t *testing.T) {
	t.Helper()
	for i, a := range l.spans {
		for _, b := range l.spans[:i] {
			require.True(t, a[1] < b[0] || b[1] < a[0], "delete %v overlaps earlier delete %v", a, b)
		}
	}
}

func TestPruneDeletes(t *testing.T) {
	db, users := openUsers(t)
	dels := traceDeletes(t)
	putN(t, users, db, "a", 10)

	_, err := users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{1, 7}}, dels.runs())
	require.Zero(t, dels.rangeCount(), "a short span gets point deletes")

	_, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Len(t, dels.spans, 7, "nothing more to prune: no delete written")

	putN(t, users, db, "a", 2)
	_, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{1, 9}}, dels.runs(), "a prune starts where the last one ended")

	_, err = users.PruneBefore(db, "a", 1000)
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{1, 11}}, dels.runs())
	require.Len(t, dels.spans, 11, "one point delete a version")
	dels.requireDisjoint(t)
}

// Prunes and Puts inside one Update count each other: the second prune
// starts where the first ended.
func TestPruneInsideUpdateDeletes(t *testing.T) {
	db, users := openUsers(t)
	dels := traceDeletes(t)
	putN(t, users, db, "a", 4)
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		putN(t, users, b, "a", 2)
		if _, err := users.Prune(b, "a", 3); err != nil {
			return err
		}
		_, err := users.Prune(b, "a", 2)
		return err
	}))
	require.Equal(t, [][2]int64{{1, 4}}, dels.runs())
	dels.requireDisjoint(t)
}

// Long spans go with one range delete, short ones with point deletes;
// either starts where the last drop ended, so no two ever overlap.
func TestPruneLongSpansWithOneRangeDelete(t *testing.T) {
	defer versioned.SetDropRangeMin(4)()
	db, users := openUsers(t)
	dels := traceDeletes(t)
	putN(t, users, db, "a", 20)
	n, err := users.Prune(db, "a", 17) // 1..3: points
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	n, err = users.PruneBefore(db, "a", 10) // 4..9: a range
	require.NoError(t, err)
	require.Equal(t, int64(6), n)
	n, err = users.Prune(db, "a", 7) // 10..13: a range of exactly 4
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	require.Equal(t, [][2]int64{{1, 1}, {2, 2}, {3, 3}, {4, 9}, {10, 13}}, dels.spans)
	require.Equal(t, []bool{false, false, false, true, true}, dels.ranges)
	require.Equal(t, testutil.Range(20, 14), versionsOf(testutil.Collect(t, users.History("a", tipkv.Query{}))))

	n, err = users.Purge(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Equal(t, [2]int64{14, 20}, dels.spans[len(dels.spans)-1])
	dels.requireDisjoint(t)
	require.Empty(t, testutil.Collect(t, users.History("a", tipkv.Query{})))
}

// The loop of issue 16, test-sized: Put, Prune(keep 3) and Latest of one
// document. It stays flat on what this package controls, without timing
// anything: no range tombstone is written (every new iterator would
// fragment them all again), and an iteration positions iterators as often
// at the end as at the start (the oldest version is remembered, so a Prune
// never walks back over the point tombstones of the ones before).
// BenchmarkPruneLoop times it.
func TestPruneLoopStaysFlat(t *testing.T) {
	db, users := openUsers(t)
	dels := traceDeletes(t)
	var c seekCounter
	defer versioned.WrapIters(c.wrap)()
	const iters, window = 3000, 1000
	var first, last int64
	for i := range iters {
		if i == 100 || i == iters-window {
			c.seeks.Store(0)
			c.nexts.Store(0)
		}
		v, err := users.Put(db, "doc", user{Age: i})
		require.NoError(t, err)
		_, err = users.Prune(db, "doc", 3)
		require.NoError(t, err)
		d, err := users.AsOf("doc", v) // a seek (Latest is a point Get here)
		require.NoError(t, err)
		require.Equal(t, v, d.Version)
		switch i {
		case 100 + window - 1:
			first = c.seeks.Load() + c.nexts.Load()
		case iters - 1:
			last = c.seeks.Load() + c.nexts.Load()
		}
	}
	require.Zero(t, dels.rangeCount())
	require.Len(t, dels.spans, iters-3, "one point delete a pruned version")
	require.Equal(t, int64(window), first, "one seek an iteration: AsOf's")
	require.Equal(t, first, last)
	require.Equal(t, testutil.Range(iters, iters-2), versionsOf(testutil.Collect(t, users.History("doc", tipkv.Query{}))))
}

func TestTrimDeletes(t *testing.T) {
	db, f, clock := openFeed(t)
	dels := traceDeletes(t)
	appendN := func(n int) {
		for range n {
			clock.Set(clock.Now().Add(time.Second))
			_, err := f.Append(db, "s", click{})
			require.NoError(t, err)
		}
	}
	appendN(10)
	require.NoError(t, f.Trim(db, "s", 4))
	require.Len(t, dels.spans, 6, "one point delete an event")
	require.NoError(t, f.Trim(db, "s", 4))
	require.Len(t, dels.spans, 6, "nothing more to trim, no delete written")
	appendN(3)
	require.NoError(t, f.Trim(db, "s", 4))
	require.Len(t, dels.spans, 9)
	require.NoError(t, f.Trim(db, "s", 0))
	require.Len(t, dels.spans, 13)
	require.Zero(t, dels.rangeCount())
	dels.requireDisjoint(t)
}

func TestTrimBeforeDeletes(t *testing.T) {
	db, f, _ := openFeed(t)
	dels := traceDeletes(t)
	for i := range 10 {
		_, err := f.AppendAt(db, "t", t0.Add(time.Duration(i)*time.Second), click{})
		require.NoError(t, err)
	}
	require.NoError(t, f.TrimBefore(db, "t", t0.Add(3*time.Second)))
	require.Len(t, dels.spans, 3)
	require.NoError(t, f.TrimBefore(db, "t", t0.Add(3*time.Second)))
	require.NoError(t, f.TrimBefore(db, "t", t0))
	require.Len(t, dels.spans, 3, "nothing more to trim, no delete written")
	require.NoError(t, f.TrimBefore(db, "t", t0.Add(time.Hour)))
	require.Len(t, dels.spans, 10)
	require.Zero(t, dels.rangeCount())
	dels.requireDisjoint(t)
}

// Long runs of events go with one range delete, starting where the last
// trim ended; events appended into the trimmed past go with point deletes,
// and no range covers the earlier ones.
func TestTrimLongRunsWithOneRangeDelete(t *testing.T) {
	defer versioned.SetDropRangeMin(4)()
	db, f, _ := openFeed(t)
	dels := traceDeletes(t)
	sec := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	for i := range 20 {
		_, err := f.AppendAt(db, "s", sec(i), click{})
		require.NoError(t, err)
	}
	require.NoError(t, f.TrimBefore(db, "s", sec(3))) // 0..2: points
	require.NoError(t, f.Trim(db, "s", 10))           // 3..9: a range
	require.Equal(t, []bool{false, false, false, true}, dels.ranges)
	require.Equal(t, [2]int64{sec(3).UnixNano(), sec(9).UnixNano()}, dels.spans[3])

	_, err := f.AppendAt(db, "s", sec(1).Add(time.Millisecond), click{})
	require.NoError(t, err)
	require.NoError(t, f.TrimBefore(db, "s", sec(15))) // 1.001 and 10..14
	require.Equal(t, []bool{false, false, false, true, true, false}, dels.ranges)
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 5)
	dels.requireDisjoint(t)
}

// On a shared engine every drop is one range delete: a range is one
// operation on a remote engine, and it needs no read of what it covers.
func TestSharedDropsAreRanges(t *testing.T) {
	db := openShared(t)
	users := newUsers(t, db)
	dels := traceDeletes(t)
	putN(t, users, db, "a", 10)
	n, err := users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Equal(t, [][2]int64{{1, 7}}, dels.spans)
	require.Equal(t, []bool{true}, dels.ranges)

	clock := testutil.NewClock(t0)
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now})
	require.NoError(t, err)
	for range 5 {
		clock.Set(clock.Now().Add(time.Second))
		_, err := f.Append(db, "s", click{})
		require.NoError(t, err)
	}
	require.NoError(t, f.Trim(db, "s", 2))
	require.Equal(t, []bool{true, true}, dels.ranges)
	require.Equal(t, [2]int64{1, t0.Add(3 * time.Second).UnixNano()}, dels.spans[1], "from position 1: another process's events may lie anywhere")
	require.NoError(t, f.Trim(db, "s", 2))
	require.Len(t, dels.spans, 2, "nothing to drop: no delete")
}
