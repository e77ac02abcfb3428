package etcdkv

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

func vkey(id string, v int64) []byte {
	p := codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "c"), id)
	return codec.AppendDesc(p, v)
}

func vprefix(id string) []byte {
	return codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "c"), id)
}

func mustApply(t *testing.T, s *Store, f func(b engine.Batch)) {
	t.Helper()
	b := s.NewBatch()
	f(b)
	require.NoError(t, b.Apply(true))
}

// pages records the pages iterators read: the limit asked, the keys got.
func pages(s *Store) *[][2]int {
	var p [][2]int
	s.onPage = func(limit, got int) { p = append(p, [2]int{limit, got}) }
	return &p
}

func writeVersions(t *testing.T, s *Store, id string, n int) {
	for start := 1; start <= n; start += 100 {
		mustApply(t, s, func(b engine.Batch) {
			for v := start; v < start+100 && v <= n; v++ {
				require.NoError(t, b.Set(vkey(id, int64(v)), []byte(fmt.Sprint(v))))
			}
		})
	}
}

// Latest is one page of one key, whatever the document holds; a scan's
// pages double up to PageSize.
func TestIterPageSizes(t *testing.T) {
	s := OpenForTest(t, Config{PageSize: 8})
	writeVersions(t, s, "doc", 100)
	writeVersions(t, s, "other", 3)
	p := pages(s)
	pre := vprefix("doc")
	it, err := s.NewIter(pre, codec.PrefixEnd(pre))
	require.NoError(t, err)
	require.True(t, it.SeekPrefixGE(pre))
	require.Equal(t, vkey("doc", 100), it.Key(), "the newest version first")
	require.Equal(t, [][2]int{{1, 1}}, *p, "Latest reads one key")
	n := 1
	for it.Next() {
		n++
	}
	require.NoError(t, it.Close())
	require.Equal(t, 100, n)
	want := [][2]int{{1, 1}, {2, 2}, {4, 4}}
	for left := 100 - 7; left > 0; left -= 8 {
		want = append(want, [2]int{8, min(8, left)})
	}
	require.Equal(t, want, *p, "pages double up to PageSize; the last says there is no more")

	// A skip-scan: one single-key page per document.
	*p = nil
	coll := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "c")
	it, err = s.NewIter(coll, codec.PrefixEnd(coll))
	require.NoError(t, err)
	docs := 0
	for ok := it.First(); ok; ok = it.NextPrefix() {
		docs++
	}
	require.NoError(t, it.Close())
	require.Equal(t, 2, docs)
	require.Equal(t, [][2]int{{1, 1}, {1, 1}, {1, 0}}, *p)
}

// A reader that says how many keys it expects (engine.NewIterN) gets them
// in the first page, up to PageSize; pages double from there, and later
// seeks start at one key again.
func TestIterSizeHint(t *testing.T) {
	s := OpenForTest(t, Config{PageSize: 16})
	writeVersions(t, s, "doc", 100)
	pre := vprefix("doc")
	for _, c := range []struct {
		n    int
		want [][2]int
	}{
		{10, [][2]int{{10, 10}, {16, 16}, {1, 1}}},
		{0, [][2]int{{1, 1}, {2, 2}, {4, 4}, {8, 8}, {16, 16}, {1, 1}}},
		{1000, [][2]int{{16, 16}, {16, 16}, {1, 1}}},
	} {
		p := pages(s)
		it, err := engine.NewIterN(s, pre, codec.PrefixEnd(pre), c.n)
		require.NoError(t, err)
		n := 0
		for ok := it.First(); ok && n < 20; ok = it.Next() {
			require.Equal(t, vkey("doc", int64(100-n)), it.Key())
			n++
		}
		require.True(t, it.SeekGE(vkey("doc", 50)))
		require.Equal(t, vkey("doc", 50), it.Key())
		require.NoError(t, it.Close())
		require.Equal(t, c.want, *p, "n=%d", c.n)
	}
	snap, err := s.NewSnapshot()
	require.NoError(t, err)
	defer snap.Close()
	p := pages(s)
	it, err := engine.NewIterN(snap, pre, codec.PrefixEnd(pre), 5)
	require.NoError(t, err)
	require.True(t, it.First())
	require.NoError(t, it.Close())
	require.Equal(t, [][2]int{{5, 5}}, *p, "a snapshot takes the hint too")
}

// A paged read sees the revision of its first page: writes, deletes and
// overwrites made meanwhile, by this store or another, do not show.
func TestIterPinnedToRevision(t *testing.T) {
	s := OpenForTest(t, Config{PageSize: 4})
	other := OpenForTest(t, Config{Namespace: s.Namespace()})
	writeVersions(t, s, "doc", 40)
	pre := vprefix("doc")
	it, err := s.NewIter(pre, codec.PrefixEnd(pre))
	require.NoError(t, err)
	defer it.Close()
	require.True(t, it.First())
	mustApply(t, other, func(b engine.Batch) {
		require.NoError(t, b.Set(vkey("doc", 41), []byte("new")))           // before the cursor
		require.NoError(t, b.Set(vkey("doc", 10), []byte("overwritten")))   // ahead
		require.NoError(t, b.DeleteRange(vkey("doc", 9), vkey("doc", 0)))   // ahead: versions 1-9
		require.NoError(t, b.Set(vkey("doc", 0), []byte("a version zero"))) // ahead, new
	})
	var got []string
	for ok := true; ok; ok = it.Next() {
		v, err := it.Value()
		require.NoError(t, err)
		got = append(got, string(v))
	}
	require.NoError(t, it.Error())
	want := []string{}
	for v := 40; v >= 1; v-- {
		want = append(want, fmt.Sprint(v))
	}
	require.Equal(t, want, got)
	require.Equal(t, 40+2-9, countKeys(t, s, pre), "a new iterator sees the writes")
}

func countKeys(t *testing.T, s engine.Reader, pre []byte) int {
	it, err := s.NewIter(pre, codec.PrefixEnd(pre))
	require.NoError(t, err)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	require.NoError(t, it.Close())
	return n
}

// A compaction of the revision a paged read is pinned to fails its next
// page with ErrCompacted; a snapshot's reads fail the same way.
func TestIterCompactedMidRead(t *testing.T) {
	s := OpenForTest(t, Config{})
	writeVersions(t, s, "doc", 10)
	snap, err := s.NewSnapshot()
	require.NoError(t, err)
	defer snap.Close()
	pre := vprefix("doc")
	it, err := s.NewIter(pre, codec.PrefixEnd(pre))
	require.NoError(t, err)
	require.True(t, it.First()) // a page of one key; the next page reads at its revision
	mustApply(t, s, func(b engine.Batch) { require.NoError(t, b.Set(vkey("doc", 11), nil)) })
	rev, err := s.Revision(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.CompactRevisions(context.Background(), rev))
	require.False(t, it.Next())
	require.ErrorIs(t, it.Error(), ErrCompacted)
	require.ErrorIs(t, it.Close(), ErrCompacted)

	_, err = snap.Get(vkey("doc", 1))
	require.ErrorIs(t, err, ErrCompacted)
	sit, err := snap.NewIter(pre, codec.PrefixEnd(pre))
	require.NoError(t, err)
	require.False(t, sit.First())
	require.ErrorIs(t, sit.Error(), ErrCompacted)
	require.Equal(t, 11, countKeys(t, s, pre), "a new read is fine")
}

// Last reads the range's last key, at the iterator's revision; the range
// may be empty.
func TestIterLast(t *testing.T) {
	s := OpenForTest(t, Config{})
	writeVersions(t, s, "doc", 5)
	pre := vprefix("doc")
	it, err := s.NewIter(pre, codec.PrefixEnd(pre))
	require.NoError(t, err)
	require.True(t, it.First())
	mustApply(t, s, func(b engine.Batch) { require.NoError(t, b.Set(vkey("doc", 0), nil)) })
	require.True(t, it.Last())
	require.Equal(t, vkey("doc", 1), it.Key(), "version 0, written after the first page, is not seen")
	require.False(t, it.Next())
	require.NoError(t, it.Close())

	miss := vprefix("missing")
	it, err = s.NewIter(miss, codec.PrefixEnd(miss))
	require.NoError(t, err)
	require.False(t, it.Last())
	require.NoError(t, it.Close())
}
