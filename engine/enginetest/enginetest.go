// Package enginetest is the conformance suite of the storage contract: the
// tests every engine.Store must pass, whatever the engine. The engine's
// own test package runs it:
//
//	func TestConformance(t *testing.T) {
//		enginetest.Run(t, enginetest.Harness{Open: openMyStore})
//	}
//
// The suite checks the contract's semantics only (order, bounds, atomicity,
// conditions, snapshots, limits, Close, Watch); package tipkvtest checks
// tipkv's packages on top of a store.
package enginetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// Harness is how a suite reaches an engine. The same harness runs this
// package's suite (the contract, store by store) and package tipkvtest's
// (tipkv's documents, feeds and queues on DBs made with tipkv.OpenEngine
// on the harness's stores).
type Harness struct {
	// Name names the engine in test output and DB names.
	Name string

	// Open returns a new, empty store (a fresh namespace on a shared
	// engine). The suite closes it (or the DB made on it does), or lets
	// the harness clean it up when the test ends.
	Open func(t testing.TB) engine.Store

	// Second, if set, returns another handle on the keys of s, with memory
	// of its own, as another process would open them. Required for shared
	// engines; nil for an exclusive one.
	Second func(t testing.TB, s engine.Store) engine.Store

	// Reopen, if set, returns a new handle on the keys of s after s was
	// closed, as a process that restarted would open them. Nil for an
	// engine that forgets its keys at Close (one in memory).
	Reopen func(t testing.TB, s engine.Store) engine.Store

	// Scale divides the sizes of the heavier tests, for slow engines. The
	// default (0) is 1.
	Scale int
}

func (h Harness) n(full int) int {
	if h.Scale > 1 {
		return max(full/h.Scale, 1)
	}
	return full
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"GetMissingAndPresent", testGet},
		{"IterBoundsAndOrder", testIterBounds},
		{"IterSeeks", testIterSeeks},
		{"IterPrefixes", testIterPrefixes},
		{"IterSeesOneView", testIterView},
		{"IterPaging", testIterPaging},
		{"IterSizeHint", testIterN},
		{"BatchOrder", testBatchOrder},
		{"BatchEmptyAndLen", testBatchEmpty},
		{"BatchCopies", testBatchCopies},
		{"Conditions", testConditions},
		{"ConditionFailureWritesNothing", testConditionAtomic},
		{"ConditionsSeeStateBeforeBatch", testConditionsBefore},
		{"CompareAndSwapUnderConcurrency", testCAS},
		{"RangeEmptyUnderConcurrency", testRangeEmptyRace},
		{"BadConditionsAndBounds", testBadInput},
		{"Limits", testLimits},
		{"Snapshot", testSnapshot},
		{"SyncApplyAndWait", testSync},
		{"AnyBytes", testAnyBytes},
		{"Watch", testWatch},
		{"SecondHandle", testSecond},
		{"LockExcludes", testLockExcludes},
		{"LockHoldingGivesWay", testLockHolding},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, h) })
	}
}

func open(t *testing.T, h Harness) engine.Store {
	t.Helper()
	s := h.Open(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// vkey is a version key: 01 | coll | id | desc(v).
func vkey(coll, id string, v int64) []byte {
	k := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), coll)
	return codec.AppendDesc(codec.AppendString(k, id), v)
}

// prefix is a document's prefix: 01 | coll | id.
func prefix(coll, id string) []byte {
	k := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), coll)
	return codec.AppendString(k, id)
}

// qkey is a queue item key: 02 | name | asc(seq).
func qkey(name string, seq int64) []byte {
	return codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), name), seq)
}

func qprefix(name string) []byte {
	return codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), name)
}

func apply(t testing.TB, s engine.Store, f func(b engine.Batch)) error {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	f(b)
	if err := b.Apply(true); err != nil {
		return err
	}
	return b.Wait()
}

func mustApply(t testing.TB, s engine.Store, f func(b engine.Batch)) {
	t.Helper()
	require.NoError(t, apply(t, s, f))
}

func set(t testing.TB, s engine.Store, kv ...[]byte) {
	t.Helper()
	mustApply(t, s, func(b engine.Batch) {
		for i := 0; i < len(kv); i += 2 {
			require.NoError(t, b.Set(kv[i], kv[i+1]))
		}
	})
}

func getString(t testing.TB, s engine.Reader, k []byte) (string, bool) {
	t.Helper()
	v, err := s.Get(k)
	if errors.Is(err, engine.ErrNotFound) {
		return "", false
	}
	require.NoError(t, err)
	return string(v), true
}

// scan returns the keys in [lo, hi), in order, with their values.
func scan(t testing.TB, r engine.Reader, lo, hi []byte) (keys [][]byte, vals []string) {
	t.Helper()
	it, err := r.NewIter(lo, hi)
	require.NoError(t, err)
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, bytes.Clone(it.Key()))
		v, err := it.Value()
		require.NoError(t, err)
		vals = append(vals, string(v))
	}
	require.NoError(t, it.Error())
	require.NoError(t, it.Close())
	return keys, vals
}

func testGet(t *testing.T, h Harness) {
	s := open(t, h)
	_, err := s.Get(vkey("c", "a", 1))
	require.ErrorIs(t, err, engine.ErrNotFound)
	set(t, s, vkey("c", "a", 1), []byte("one"))
	v, err := s.Get(vkey("c", "a", 1))
	require.NoError(t, err)
	require.Equal(t, "one", string(v))
	v[0] = 'X' // a copy: changing it changes nothing stored
	got, _ := getString(t, s, vkey("c", "a", 1))
	require.Equal(t, "one", got)
	set(t, s, vkey("c", "a", 1), []byte{})
	got, ok := getString(t, s, vkey("c", "a", 1))
	require.True(t, ok, "an empty value is a value")
	require.Equal(t, "", got)

	// GetAppend (the store's own or the fallback) appends, and leaves dst
	// alone on a miss.
	set(t, s, vkey("c", "b", 1), []byte("two"))
	dst, err := engine.GetAppend(s, []byte("x:"), vkey("c", "b", 1))
	require.NoError(t, err)
	require.Equal(t, "x:two", string(dst))
	dst, err = engine.GetAppend(s, []byte("x:"), vkey("c", "b", 2))
	require.ErrorIs(t, err, engine.ErrNotFound)
	require.Equal(t, "x:", string(dst))
}

func testIterBounds(t *testing.T, h Harness) {
	s := open(t, h)
	for i := int64(1); i <= 10; i++ {
		set(t, s, qkey("q", i), []byte(fmt.Sprint(i)))
	}
	set(t, s, qkey("p", 1), []byte("other queue"), qkey("r", 1), []byte("other queue"))
	keys, vals := scan(t, s, qkey("q", 3), qkey("q", 7))
	require.Equal(t, []string{"3", "4", "5", "6"}, vals, "[lo, hi): lo in, hi out")
	for i := 1; i < len(keys); i++ {
		require.Negative(t, bytes.Compare(keys[i-1], keys[i]), "ascending byte order")
	}
	_, vals = scan(t, s, qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.Len(t, vals, 10, "a prefix range holds its keys only")
	_, vals = scan(t, s, qkey("q", 11), codec.PrefixEnd(qprefix("q")))
	require.Empty(t, vals)
}

func testIterSeeks(t *testing.T, h Harness) {
	s := open(t, h)
	for i := int64(1); i <= 20; i++ {
		set(t, s, qkey("q", i*2), []byte(fmt.Sprint(i*2)))
	}
	it, err := s.NewIter(qkey("q", 5), qkey("q", 31))
	require.NoError(t, err)
	defer it.Close()
	require.True(t, it.SeekGE(qkey("q", 7)))
	require.Equal(t, qkey("q", 8), it.Key())
	require.True(t, it.SeekGE(qkey("q", 1)), "a seek below lo lands at lo")
	require.Equal(t, qkey("q", 6), it.Key())
	require.False(t, it.SeekGE(qkey("q", 31)), "a seek at hi finds nothing")
	require.True(t, it.First())
	require.Equal(t, qkey("q", 6), it.Key())
	require.True(t, it.Valid())
	require.True(t, it.Last())
	require.Equal(t, qkey("q", 30), it.Key(), "Last is the last key below hi")
	require.False(t, it.Next())
	require.False(t, it.Valid())
	require.NoError(t, it.Error())
	require.True(t, it.SeekGE(qkey("q", 29)))
	v, err := it.Value()
	require.NoError(t, err)
	require.Equal(t, "30", string(v))
	require.NoError(t, it.Close())
	require.NoError(t, it.Close(), "a second Close is nil")

	empty, err := s.NewIter(qkey("z", 1), qkey("z", 9))
	require.NoError(t, err)
	require.False(t, empty.First())
	require.False(t, empty.Last())
	require.False(t, empty.SeekGE(qkey("z", 2)))
	require.NoError(t, empty.Error())
	require.NoError(t, empty.Close())
}

func testIterPrefixes(t *testing.T, h Harness) {
	s := open(t, h)
	ids := []string{"a", "a\x00", "a\xff", "b", "doc-1", "doc-10", "\x00", "\xff\xff"}
	want := map[string]int64{}
	rng := rand.New(rand.NewPCG(1, 2))
	mustApply(t, s, func(b engine.Batch) {
		for _, id := range ids {
			n := 1 + rng.Int64N(5)
			want[id] = n
			for v := int64(1); v <= n; v++ {
				require.NoError(t, b.Set(vkey("c", id, v), []byte(fmt.Sprint(v))))
			}
		}
	})
	lo := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "c")
	it, err := s.NewIter(lo, codec.PrefixEnd(lo))
	require.NoError(t, err)
	got := map[string]int64{}
	steps := 0
	for ok := it.First(); ok; ok = it.NextPrefix() {
		rest, err := codec.SkipSegment(it.Key()[1:])
		require.NoError(t, err)
		id, rest, err := codec.DecodeString(rest)
		require.NoError(t, err)
		v, _, err := codec.DecodeDesc(rest)
		require.NoError(t, err)
		require.NotContains(t, got, id, "NextPrefix came back to %q", id)
		got[id] = v
		steps++
		require.Less(t, steps, 100, "NextPrefix does not terminate")
	}
	require.NoError(t, it.Error())
	require.NoError(t, it.Close())
	require.Equal(t, want, got, "NextPrefix visits each document once, at its newest version")

	for _, id := range ids {
		p := prefix("c", id)
		it, err := s.NewIter(p, codec.PrefixEnd(p))
		require.NoError(t, err)
		n := int64(0)
		for ok := it.SeekPrefixGE(p); ok; ok = it.Next() {
			require.True(t, bytes.HasPrefix(it.Key(), p))
			n++
		}
		require.NoError(t, it.Close())
		require.Equal(t, want[id], n, "SeekPrefixGE stays within %q", id)
	}
	miss := prefix("c", "missing")
	it, err = s.NewIter(miss, codec.PrefixEnd(miss))
	require.NoError(t, err)
	require.False(t, it.SeekPrefixGE(miss))
	require.NoError(t, it.Close())
}

func testIterView(t *testing.T, h Harness) {
	s := open(t, h)
	for i := int64(1); i <= 5; i++ {
		set(t, s, qkey("q", i), []byte("old"))
	}
	it, err := s.NewIter(qkey("q", 1), qkey("q", 100))
	require.NoError(t, err)
	defer it.Close()
	require.True(t, it.First())
	mustApply(t, s, func(b engine.Batch) {
		require.NoError(t, b.Set(qkey("q", 6), []byte("new")))
		require.NoError(t, b.Set(qkey("q", 3), []byte("new")))
		require.NoError(t, b.Delete(qkey("q", 4)))
	})
	var vals []string
	for ok := true; ok; ok = it.Next() {
		v, err := it.Value()
		require.NoError(t, err)
		vals = append(vals, string(v))
	}
	require.Equal(t, []string{"old", "old", "old", "old", "old"}, vals, "an iterator reads the view it was opened on")
}

// testIterPaging reads a range larger than any sensible page, with values
// large enough that a remote engine must page, and checks order and count.
func testIterPaging(t *testing.T, h Harness) {
	s := open(t, h)
	n := h.n(3000)
	val := bytes.Repeat([]byte("v"), 1000)
	chunk := 100
	if m := s.Caps().MaxBatchOps; m > 0 {
		chunk = min(chunk, m)
	}
	if m := s.Caps().MaxBatchBytes; m > 0 {
		chunk = max(min(chunk, m/(len(val)+64)), 1)
	}
	for start := 1; start <= n; start += chunk {
		mustApply(t, s, func(b engine.Batch) {
			for i := start; i < start+chunk && i <= n; i++ {
				require.NoError(t, b.Set(qkey("q", int64(i)), val))
			}
		})
	}
	it, err := s.NewIter(qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.NoError(t, err)
	count := 0
	for ok := it.First(); ok; ok = it.Next() {
		count++
		seq, _, err := codec.DecodeAsc(it.Key()[len(qprefix("q")):])
		require.NoError(t, err)
		require.Equal(t, int64(count), seq)
		if count == n/2 {
			// A write in the middle of a paged read does not show.
			set(t, s, qkey("q", int64(n+1)), val)
		}
	}
	require.NoError(t, it.Error())
	require.NoError(t, it.Close())
	require.Equal(t, n, count)
	it, err = s.NewIter(qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.NoError(t, err)
	require.True(t, it.Last())
	require.Equal(t, qkey("q", int64(n+1)), it.Key())
	require.True(t, it.SeekGE(qkey("q", int64(n-1))))
	require.True(t, it.Next())
	require.True(t, it.Next())
	require.False(t, it.Next())
	require.NoError(t, it.Close())
}

// A size hint changes nothing about what an iterator reads.
func testIterN(t *testing.T, h Harness) {
	s := open(t, h)
	for i := int64(1); i <= 50; i++ {
		set(t, s, qkey("q", i), []byte(fmt.Sprint(i)))
	}
	for _, n := range []int{0, 1, 3, 50, 1000} {
		it, err := engine.NewIterN(s, qkey("q", 10), qkey("q", 41), n)
		require.NoError(t, err)
		count := 0
		for ok := it.SeekGE(qkey("q", 10)); ok; ok = it.Next() {
			count++
		}
		require.NoError(t, it.Error())
		require.True(t, it.Last())
		require.Equal(t, qkey("q", 40), it.Key())
		require.NoError(t, it.Close())
		require.Equal(t, 31, count, "hint %d", n)
	}
}

func testBatchOrder(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, qkey("q", 1), []byte("1"), qkey("q", 2), []byte("2"), qkey("q", 3), []byte("3"), qkey("q", 9), []byte("9"))
	mustApply(t, s, func(b engine.Batch) {
		require.NoError(t, b.Set(qkey("q", 5), []byte("a")))
		require.NoError(t, b.Set(qkey("q", 5), []byte("b"))) // the later Set wins
		require.NoError(t, b.Set(qkey("q", 6), []byte("x")))
		require.NoError(t, b.Delete(qkey("q", 6))) // a Delete after a Set deletes
		require.NoError(t, b.Delete(qkey("q", 7)))
		require.NoError(t, b.Set(qkey("q", 7), []byte("y")))                 // a Set after a Delete survives
		require.NoError(t, b.DeleteRange(qkey("q", 1), qkey("q", 4)))        // 1, 2, 3 go
		require.NoError(t, b.Set(qkey("q", 2), []byte("back")))              // a Set after the range survives
		require.NoError(t, b.DeleteRange(qkey("q", 2), qkey("q", 3)))        // ... until another range
		require.NoError(t, b.Set(qkey("q", 3), []byte("three")))             // inside the first range, after it
		require.NoError(t, b.DeleteRange(qkey("q", 8), qkey("q", 10)))       // 9 goes
		require.NoError(t, b.DeleteRange(qkey("q", 8), qkey("q", 10)))       // twice is fine
		require.NoError(t, b.Delete(qkey("q", 9)))                           // so is a delete inside it
		require.NoError(t, b.DeleteRange(qkey("q", 20), qkey("q", 30)))      // an empty range
		require.NoError(t, b.DeleteRange(qkey("q", 25), qkey("q", 40)))      // overlapping ranges
		require.NoError(t, b.Set(qkey("q", 35), []byte("after overlap")))    // survives both
		require.NoError(t, b.DeleteRange(qkey("q", 34), qkey("q", 35)))      // ends just before it
		require.NoError(t, b.Set(qkey("q", 40), []byte("at the range end"))) // hi is exclusive
	})
	_, vals := scan(t, s, qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.Equal(t, []string{"three", "b", "y", "after overlap", "at the range end"}, vals)
}

// A batch copies what it is given: the callers recycle one buffer for
// every key and value of a call, and for a condition's bytes.
func testBatchCopies(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, qkey("c", 1), []byte("old"))
	buf := make([]byte, 0, 64)
	fill := func(b []byte, x byte) {
		for i := range b {
			b[i] = x
		}
	}
	mustApply(t, s, func(b engine.Batch) {
		// One buffer behind the condition's key and value, then every
		// write's key and value; each overwritten once the call returns.
		k := append(buf[:0], qkey("c", 1)...)
		v := []byte("old")
		require.NoError(t, b.Require(engine.Equals(k, v)))
		fill(k, 0xEE)
		fill(v, 'x')
		for i := int64(2); i <= 4; i++ {
			k = append(buf[:0], qkey("c", i)...)
			v = append(k[len(k):], fmt.Sprint(i)...)
			require.NoError(t, b.Set(k, v))
			fill(k, 0xEE)
			fill(v, 'x')
		}
		k = append(buf[:0], qkey("c", 1)...)
		require.NoError(t, b.Delete(k))
		fill(k, 0xEE)
		lo, hi := append(buf[:0], qkey("c", 10)...), qkey("c", 20)
		require.NoError(t, b.DeleteRange(lo, hi))
		fill(lo, 0xEE)
	})
	keys, vals := scan(t, s, qprefix("c"), codec.PrefixEnd(qprefix("c")))
	require.Len(t, keys, 3)
	require.Equal(t, []string{"2", "3", "4"}, vals)
}

func testBatchEmpty(t *testing.T, h Harness) {
	s := open(t, h)
	b := s.NewBatch()
	require.True(t, b.Empty())
	require.Zero(t, b.Len())
	require.NoError(t, b.Require(engine.Absent(qkey("q", 1))))
	require.True(t, b.Empty(), "a condition is not a write")
	require.NoError(t, b.Set(qkey("q", 1), []byte("x")))
	require.NoError(t, b.Delete(qkey("q", 2)))
	require.NoError(t, b.DeleteRange(qkey("q", 3), qkey("q", 5)))
	require.False(t, b.Empty())
	require.Equal(t, 3, b.Len())
	require.Positive(t, b.Size())
	require.NoError(t, b.Close())
	_, ok := getString(t, s, qkey("q", 1))
	require.False(t, ok, "a batch closed without Apply writes nothing")
	// An empty batch applies.
	mustApply(t, s, func(engine.Batch) {})
}

func testConditions(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, qkey("q", 5), []byte("five"), qkey("q", 10), []byte(""))
	k := func(i int64) []byte { return qkey("q", i) }
	cases := []struct {
		name string
		c    engine.Cond
		ok   bool
	}{
		{"absent on a missing key", engine.Absent(k(1)), true},
		{"absent on a present key", engine.Absent(k(5)), false},
		{"absent on a key with an empty value", engine.Absent(k(10)), false},
		{"present on a present key", engine.Present(k(5)), true},
		{"present on a key with an empty value", engine.Present(k(10)), true},
		{"present on a missing key", engine.Present(k(1)), false},
		{"equals the value", engine.Equals(k(5), []byte("five")), true},
		{"equals another value", engine.Equals(k(5), []byte("six")), false},
		{"equals a prefix of the value", engine.Equals(k(5), []byte("fiv")), false},
		{"equals on a missing key", engine.Equals(k(1), []byte("")), false},
		{"equals an empty value", engine.Equals(k(10), []byte("")), true},
		{"empty range", engine.Empty(k(6), k(10)), true},
		{"range holding a key", engine.Empty(k(4), k(6)), false},
		{"range starting at a key", engine.Empty(k(5), k(6)), false},
		{"range ending at a key (exclusive)", engine.Empty(k(6), k(10)), true},
		{"range holding an empty value", engine.Empty(k(10), k(11)), false},
		{"range in another prefix", engine.Empty(qkey("r", 1), qkey("r", 100)), true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mark := qkey("mark", int64(i+1))
			err := apply(t, s, func(b engine.Batch) {
				require.NoError(t, b.Require(tc.c))
				require.NoError(t, b.Set(mark, []byte("x")))
			})
			_, wrote := getString(t, s, mark)
			if tc.ok {
				require.NoError(t, err)
				require.True(t, wrote)
				return
			}
			require.ErrorIs(t, err, engine.ErrConditionFailed)
			require.NotErrorIs(t, err, engine.ErrUnknownOutcome)
			require.False(t, wrote, "a failed condition writes nothing")
		})
	}
}

func testConditionAtomic(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, qkey("q", 1), []byte("1"))
	err := apply(t, s, func(b engine.Batch) {
		require.NoError(t, b.Set(qkey("q", 2), []byte("2")))
		require.NoError(t, b.DeleteRange(qkey("q", 1), qkey("q", 2)))
		require.NoError(t, b.Require(engine.Present(qkey("q", 1)))) // holds
		require.NoError(t, b.Require(engine.Absent(qkey("q", 1))))  // fails
		require.NoError(t, b.Set(qkey("q", 3), []byte("3")))
	})
	require.ErrorIs(t, err, engine.ErrConditionFailed)
	_, vals := scan(t, s, qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.Equal(t, []string{"1"}, vals, "one failed condition: nothing of the batch applies")
}

func testConditionsBefore(t *testing.T, h Harness) {
	s := open(t, h)
	mustApply(t, s, func(b engine.Batch) {
		require.NoError(t, b.Set(qkey("q", 1), []byte("new")))
		require.NoError(t, b.Require(engine.Absent(qkey("q", 1))))
		require.NoError(t, b.Require(engine.Empty(qkey("q", 1), qkey("q", 9))))
	})
	v, _ := getString(t, s, qkey("q", 1))
	require.Equal(t, "new", v)
	mustApply(t, s, func(b engine.Batch) {
		require.NoError(t, b.Delete(qkey("q", 1)))
		require.NoError(t, b.Require(engine.Equals(qkey("q", 1), []byte("new"))))
	})
	_, ok := getString(t, s, qkey("q", 1))
	require.False(t, ok)
}

// testCAS runs increments of one counter by compare-and-swap from several
// goroutines (and handles, where there is a second): every increment that
// succeeded is counted exactly once.
func testCAS(t *testing.T, h Harness) {
	s := open(t, h)
	stores := []engine.Store{s}
	if h.Second != nil {
		stores = append(stores, h.Second(t, s))
	}
	key := qkey("counter", 1)
	set(t, s, key, []byte("0"))
	workers, each := 4, h.n(50)
	var wins, losses atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(st engine.Store) {
			defer wg.Done()
			for range each {
				cur, err := st.Get(key)
				if err != nil {
					t.Error(err)
					return
				}
				var n int
				fmt.Sscan(string(cur), &n)
				err = apply(t, st, func(b engine.Batch) {
					_ = b.Require(engine.Equals(key, cur))
					_ = b.Set(key, []byte(fmt.Sprint(n+1)))
				})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, engine.ErrConditionFailed):
					losses.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}(stores[w%len(stores)])
	}
	wg.Wait()
	v, _ := getString(t, s, key)
	require.Equal(t, fmt.Sprint(wins.Load()), v, "every successful CAS counted once (%d lost)", losses.Load())
}

// testRangeEmptyRace has writers race to claim one empty range: exactly one
// wins each round.
func testRangeEmptyRace(t *testing.T, h Harness) {
	s := open(t, h)
	stores := []engine.Store{s}
	if h.Second != nil {
		stores = append(stores, h.Second(t, s))
	}
	for round := range h.n(20) {
		p := qprefix(fmt.Sprintf("claim-%d", round))
		var wins atomic.Int64
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func(st engine.Store) {
				defer wg.Done()
				err := apply(t, st, func(b engine.Batch) {
					_ = b.Require(engine.Empty(p, codec.PrefixEnd(p)))
					_ = b.Set(codec.AppendAsc(bytes.Clone(p), int64(w+1)), []byte("mine"))
				})
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, engine.ErrConditionFailed) {
					t.Error(err)
				}
			}(stores[w%len(stores)])
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load(), "round %d", round)
		_, vals := scan(t, s, p, codec.PrefixEnd(p))
		require.Len(t, vals, 1)
	}
}

func testBadInput(t *testing.T, h Harness) {
	s := open(t, h)
	_, err := s.NewIter(nil, qkey("q", 1))
	require.Error(t, err, "an iterator needs a lower bound")
	_, err = s.NewIter(qkey("q", 1), nil)
	require.Error(t, err, "an iterator needs an upper bound")
	bad := []engine.Cond{
		{Kind: 0, Key: qkey("q", 1)},
		{Kind: 99, Key: qkey("q", 1)},
		engine.Absent(nil),
		engine.Empty(qkey("q", 5), qkey("q", 5)),
		engine.Empty(qkey("q", 6), qkey("q", 5)),
	}
	for _, c := range bad {
		err := apply(t, s, func(b engine.Batch) {
			if err := b.Require(c); err != nil {
				require.ErrorIs(t, err, engine.ErrInvalid)
			}
			_ = b.Set(qkey("q", 1), []byte("x"))
		})
		require.ErrorIs(t, err, engine.ErrInvalid, "condition %+v", c)
		_, ok := getString(t, s, qkey("q", 1))
		require.False(t, ok)
	}
}

func testLimits(t *testing.T, h Harness) {
	s := open(t, h)
	caps := s.Caps()
	if caps.MaxBatchOps > 0 {
		err := apply(t, s, func(b engine.Batch) {
			for i := range caps.MaxBatchOps + 1 {
				if err := b.Set(qkey("q", int64(i+1)), []byte("x")); err != nil {
					require.ErrorIs(t, err, engine.ErrInvalid)
					return
				}
			}
		})
		require.ErrorIs(t, err, engine.ErrInvalid, "a batch of MaxBatchOps+1 writes")
		_, vals := scan(t, s, qprefix("q"), codec.PrefixEnd(qprefix("q")))
		require.Empty(t, vals)
		mustApply(t, s, func(b engine.Batch) {
			for i := range caps.MaxBatchOps {
				require.NoError(t, b.Set(qkey("q", int64(i+1)), []byte("x")))
			}
		})
		_, vals = scan(t, s, qprefix("q"), codec.PrefixEnd(qprefix("q")))
		require.Len(t, vals, caps.MaxBatchOps, "a batch of MaxBatchOps writes")
	}
	if caps.MaxValueSize > 0 {
		err := apply(t, s, func(b engine.Batch) {
			if err := b.Set(qkey("big", 1), make([]byte, caps.MaxValueSize+1)); err != nil {
				require.ErrorIs(t, err, engine.ErrInvalid)
			}
		})
		require.ErrorIs(t, err, engine.ErrInvalid, "a value over MaxValueSize")
		_, ok := getString(t, s, qkey("big", 1))
		require.False(t, ok)
	}
	if caps.MaxBatchBytes > 0 && caps.MaxBatchBytes <= 64<<20 {
		val := make([]byte, 64<<10)
		err := apply(t, s, func(b engine.Batch) {
			for i := 0; i*len(val) <= caps.MaxBatchBytes; i++ {
				if err := b.Set(qkey("bytes", int64(i+1)), val); err != nil {
					require.ErrorIs(t, err, engine.ErrInvalid)
					return
				}
			}
		})
		require.ErrorIs(t, err, engine.ErrInvalid, "a batch over MaxBatchBytes")
		_, vals := scan(t, s, qprefix("bytes"), codec.PrefixEnd(qprefix("bytes")))
		require.Empty(t, vals)
	}
}

func testSnapshot(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, qkey("q", 1), []byte("old"), qkey("q", 2), []byte("old"))
	snap, err := s.NewSnapshot()
	require.NoError(t, err)
	set(t, s, qkey("q", 1), []byte("new"), qkey("q", 3), []byte("new"))
	mustApply(t, s, func(b engine.Batch) { require.NoError(t, b.Delete(qkey("q", 2))) })
	v, ok := getString(t, snap, qkey("q", 1))
	require.True(t, ok)
	require.Equal(t, "old", v)
	v, ok = getString(t, snap, qkey("q", 2))
	require.True(t, ok, "a snapshot keeps what was deleted after it")
	require.Equal(t, "old", v)
	_, vals := scan(t, snap, qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.Equal(t, []string{"old", "old"}, vals)
	_, vals = scan(t, s, qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.Equal(t, []string{"new", "new"}, vals)
	require.NoError(t, snap.Close())
}

func testSync(t *testing.T, h Harness) {
	s := open(t, h)
	b := s.NewBatch()
	require.NoError(t, b.Set(qkey("q", 1), []byte("synced")))
	require.NoError(t, b.Apply(true))
	_, ok := getString(t, s, qkey("q", 1))
	require.True(t, ok, "visible once Apply returns")
	require.NoError(t, b.Wait())
	require.NoError(t, b.Close())
	b = s.NewBatch()
	require.NoError(t, b.Set(qkey("q", 2), []byte("unsynced")))
	require.NoError(t, b.Apply(false))
	require.NoError(t, b.Wait())
	require.NoError(t, b.Close())
	_, ok = getString(t, s, qkey("q", 2))
	require.True(t, ok)
}

func testAnyBytes(t *testing.T, h Harness) {
	s := open(t, h)
	val := make([]byte, 256)
	for i := range val {
		val[i] = byte(i)
	}
	big := bytes.Repeat([]byte{0x00, 0xff}, 256<<10) // 512 KiB
	ids := []string{"\x00", "\x00\x00", "\xff", "\xff\x00\xff", "a\x00b", string([]byte{0xc1})}
	mustApply(t, s, func(b engine.Batch) {
		for i, id := range ids {
			require.NoError(t, b.Set(vkey("c", id, int64(i+1)), val))
		}
		require.NoError(t, b.Set(vkey("c", "big", 1), big))
	})
	for i, id := range ids {
		got, ok := getString(t, s, vkey("c", id, int64(i+1)))
		require.True(t, ok, "id %q", id)
		require.Equal(t, string(val), got)
	}
	got, _ := getString(t, s, vkey("c", "big", 1))
	require.Equal(t, string(big), got)
}

func testWatch(t *testing.T, h Harness) {
	s := open(t, h)
	w, ok := s.(engine.Watcher)
	if !s.Caps().Watch {
		t.Skip("the engine does not declare Watch")
	}
	require.True(t, ok, "Caps.Watch is set but the store is not an engine.Watcher")
	writer := s
	if h.Second != nil {
		writer = h.Second(t, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := w.Watch(ctx, qprefix("watched"), codec.PrefixEnd(qprefix("watched")))
	require.NoError(t, err)
	set(t, writer, qkey("watched", 1), []byte("x"))
	_, open := <-ch
	require.True(t, open, "a commit in the range wakes the watch")
	cancel()
	for range ch { // drains, then ends: closed when ctx ends
	}

	// A watch ends when the store closes, and Watch after Close is refused.
	s2 := h.Open(t)
	w2 := s2.(engine.Watcher)
	ch, err = w2.Watch(context.Background(), qprefix("watched"), codec.PrefixEnd(qprefix("watched")))
	require.NoError(t, err)
	require.NoError(t, s2.Close())
	for range ch {
	}
	_, err = w2.Watch(context.Background(), qprefix("watched"), codec.PrefixEnd(qprefix("watched")))
	require.ErrorIs(t, err, engine.ErrClosed)
}

func testSecond(t *testing.T, h Harness) {
	if h.Second == nil {
		if open(t, h).Caps().Shared {
			t.Fatal("a shared engine's harness must give a second handle")
		}
		t.Skip("no second handle: an exclusive engine")
	}
	a := open(t, h)
	b := h.Second(t, a)
	set(t, a, qkey("q", 1), []byte("from a"))
	v, ok := getString(t, b, qkey("q", 1))
	require.True(t, ok)
	require.Equal(t, "from a", v)
	err := apply(t, b, func(bt engine.Batch) {
		require.NoError(t, bt.Require(engine.Absent(qkey("q", 1))))
		require.NoError(t, bt.Set(qkey("q", 1), []byte("from b")))
	})
	require.ErrorIs(t, err, engine.ErrConditionFailed, "b sees a's write at commit")
}

func testClose(t *testing.T, h Harness) {
	s := h.Open(t)
	set(t, s, qkey("q", 1), []byte("1"), qkey("q", 2), []byte("2"))
	it, err := s.NewIter(qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.NoError(t, err)
	require.True(t, it.First())
	require.NoError(t, s.Close(), "Close does not wait for an open iterator")
	for it.Next() {
	}
	require.ErrorIs(t, it.Error(), engine.ErrClosed, "an iterator open at Close ends with ErrClosed")
	require.NoError(t, it.Close())
	_, err = s.Get(qkey("q", 1))
	require.ErrorIs(t, err, engine.ErrClosed)
	_, err = s.NewIter(qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.ErrorIs(t, err, engine.ErrClosed)
	_, err = s.NewSnapshot()
	require.ErrorIs(t, err, engine.ErrClosed)
	b := s.NewBatch()
	_ = b.Set(qkey("q", 3), []byte("3"))
	require.ErrorIs(t, b.Apply(true), engine.ErrClosed)
	_ = b.Close()
	require.ErrorIs(t, s.Close(), engine.ErrClosed, "a second Close")
}
