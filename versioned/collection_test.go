package versioned_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

func TestPutWritesNextVersion(t *testing.T) {
	db, users := openUsers(t)
	for want := int64(1); want <= 3; want++ {
		v, err := users.Put(db, "ada", user{Name: "Ada", Age: int(want)})
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
	d, err := users.Latest("ada")
	require.NoError(t, err)
	require.Equal(t, "ada", d.ID)
	require.Equal(t, int64(3), d.Version)
	require.Equal(t, user{Name: "Ada", Age: 3}, d.Value)

	d, err = users.Get("ada", 2)
	require.NoError(t, err)
	require.Equal(t, user{Name: "Ada", Age: 2}, d.Value)

	_, err = users.Get("ada", 4)
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	_, err = users.Get("ada", 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = users.Latest("bob")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.ErrorContains(t, err, `"bob"`)
}

func TestPutIf(t *testing.T) {
	db, users := openUsers(t)
	v, err := users.PutIf(db, "a", user{Age: 1}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)

	_, err = users.PutIf(db, "a", user{Age: 2}, 0)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, "latest version is 1, expected 0")

	v, err = users.PutIf(db, "a", user{Age: 2}, 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)

	_, err = users.PutIf(db, "a", user{Age: 3}, 1)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	_, err = users.PutIf(db, "a", user{Age: 3}, 5)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	_, err = users.PutIf(db, "a", user{}, -1)
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	d, err := users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(2), d.Version, "a failed PutIf writes nothing")
	require.Equal(t, 2, d.Value.Age)
}

func TestAsOf(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "a", 5)
	for _, tc := range []struct {
		v, want int64
	}{{1, 1}, {3, 3}, {5, 5}, {6, 5}, {1 << 62, 5}} {
		d, err := users.AsOf("a", tc.v)
		require.NoError(t, err)
		require.Equal(t, tc.want, d.Version, "AsOf(%d)", tc.v)
		require.Equal(t, int(tc.want-1), d.Value.Age)
	}
	_, err := users.AsOf("a", 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = users.AsOf("a", -1)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = users.AsOf("nobody", 3)
	require.ErrorIs(t, err, tipkv.ErrNotFound)

	// Pruned versions are gone: as of them there is nothing.
	n, err := users.PruneBefore(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	_, err = users.AsOf("a", 2)
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.ErrorContains(t, err, "no version <= 2")
	d, err := users.AsOf("a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), d.Version)

	// A neighbouring document's keys never answer for this one.
	putN(t, users, db, "a\x00", 7)
	d, err = users.AsOf("a", 100)
	require.NoError(t, err)
	require.Equal(t, int64(5), d.Version)
}

// Ids are bytes: 0x00, 0xFF and invalid UTF-8 are ids like any other, and
// an id that is a prefix of another never mixes with it.
func TestIDsAreBytes(t *testing.T) {
	db, users := openUsers(t)
	ids := []string{"\x00", "\x00\x00", "\x00\x01", "\xff", "\xff\xff", "a\x00b", "\xc3\x28", "doc-1", "doc-10", "doc-1\x00", strings.Repeat("x", versioned.MaxIDSize)}
	for i, id := range ids {
		putN(t, users, db, id, i+1)
	}
	for i, id := range ids {
		d, err := users.Latest(id)
		require.NoError(t, err, "%q", id)
		require.Equal(t, id, d.ID)
		require.Equal(t, int64(i+1), d.Version, "%q", id)
		require.Len(t, collect(t, users.History(id, tipkv.Query{})), i+1, "%q", id)
	}
	var got []string
	for _, d := range collect(t, users.LatestAll(tipkv.Query{})) {
		got = append(got, d.ID)
	}
	want := append([]string(nil), ids...)
	sortStrings(want)
	require.Equal(t, want, got, "LatestAll is in bytewise id order")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestLimitsAndBadInput(t *testing.T) {
	db := testutil.OpenMem(t)
	_, err := versioned.NewCollection[user](db, "", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = versioned.NewCollection[user](db, strings.Repeat("n", versioned.MaxNameSize+1), nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = versioned.NewCollection[user](nil, "users", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	blobs, err := versioned.NewCollection[[]byte](db, "blobs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	_, err = blobs.Put(db, "", []byte("x"))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = blobs.Put(db, strings.Repeat("i", versioned.MaxIDSize+1), []byte("x"))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = blobs.Put(db, "big", make([]byte, versioned.MaxValueSize+1))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = blobs.Latest("big")
	require.ErrorIs(t, err, tipkv.ErrNotFound, "a refused Put writes nothing")
	v, err := blobs.Put(db, "big", make([]byte, versioned.MaxValueSize))
	require.NoError(t, err)
	require.Equal(t, int64(1), v)

	for _, f := range []func() error{
		func() error { _, err := blobs.Latest(""); return err },
		func() error { _, err := blobs.Get("", 1); return err },
		func() error { _, err := blobs.AsOf("", 1); return err },
		func() error { return blobs.Delete(db, "") },
		func() error { _, err := blobs.Prune(db, "", 1); return err },
		func() error { _, err := blobs.PruneBefore(db, "", 1); return err },
		func() error { return readErr(blobs.History("", tipkv.Query{})) },
	} {
		require.ErrorIs(t, f(), tipkv.ErrInvalid)
	}
}

func TestValueThatDoesNotDecodeIsCorrupt(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "a", 2)
	key := codec.AppendDesc(codec.AppendString(codec.AppendString([]byte{byte(codec.FamilyVersions)}, "users"), "a"), 3)
	rawSet(t, db, key, []byte{0xc1, 0x01}) // 0xc1 is never valid msgpack (alone, it is a delete marker)

	_, err := users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrCorrupt)
	require.ErrorContains(t, err, `collection "users", id "a", version 3`)

	var got []int64
	var last error
	for d, err := range users.History("a", tipkv.Query{}) {
		require.NoError(t, last, "the error must be the last pair")
		if err != nil {
			last = err
			continue
		}
		got = append(got, d.Version)
	}
	require.ErrorIs(t, last, tipkv.ErrCorrupt)
	require.Empty(t, got)

	d, err := users.Get("a", 2)
	require.NoError(t, err, "other versions still read")
	require.Equal(t, int64(2), d.Version)
}

func TestUpdateWritesManyDocumentsAtomically(t *testing.T) {
	db, users := openUsers(t)
	boom := errors.New("boom")
	err := db.Update(func(b *tipkv.Batch) error {
		v, err := users.Put(b, "a", user{Name: "a"})
		require.NoError(t, err)
		require.Equal(t, int64(1), v)
		v, err = users.Put(b, "a", user{Name: "a2"})
		require.NoError(t, err)
		require.Equal(t, int64(2), v, "a second Put in one Update sees the first")
		_, err = users.Put(b, "b", user{Name: "b"})
		require.NoError(t, err)
		_, err = users.Latest("a")
		require.ErrorIs(t, err, tipkv.ErrNotFound, "reads see committed writes only")
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)

	// The aborted Update's versions are given back.
	v, err := users.Put(db, "a", user{Name: "a"})
	require.NoError(t, err)
	require.Equal(t, int64(1), v)

	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		if _, err := users.Put(b, "a", user{Name: "a2"}); err != nil {
			return err
		}
		if _, err := users.PutIf(b, "a", user{Name: "a3"}, 2); err != nil {
			return err
		}
		_, err := users.PutIf(b, "b", user{Name: "b"}, 0)
		return err
	}))
	a, err := users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(3), a.Version)
	b, err := users.Latest("b")
	require.NoError(t, err)
	require.Equal(t, int64(1), b.Version)
}

func TestUpdatePanicGivesVersionsBack(t *testing.T) {
	db, users := openUsers(t)
	require.Panics(t, func() {
		_ = db.Update(func(b *tipkv.Batch) error {
			_, _ = users.Put(b, "a", user{})
			panic("boom")
		})
	})
	v, err := users.Put(db, "a", user{})
	require.NoError(t, err, "the lock was released by the panicking Update")
	require.Equal(t, int64(1), v)
}

func TestBatchOfAnotherDBIsRefused(t *testing.T) {
	_, users := openUsers(t)
	other := testutil.OpenMem(t)
	err := other.Update(func(b *tipkv.Batch) error {
		_, err := users.Put(b, "a", user{})
		return err
	})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// Delete writes a marker as the next version: the history stays, reads
// answer ErrNotFound where they would return the marker, and the next Put
// continues after it, so a version number never comes back.
func TestDeleteWritesAMarker(t *testing.T) {
	db, users := openUsers(t)
	require.NoError(t, users.Delete(db, "a"), "deleting a missing document is no error")
	require.Empty(t, collect(t, users.History("a", tipkv.Query{})), "and writes nothing")

	putN(t, users, db, "a", 3)
	putN(t, users, db, "b", 2)
	require.NoError(t, users.Delete(db, "a"))

	_, err := users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.ErrorContains(t, err, "delete marker at version 4")
	_, err = users.Get("a", 4)
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	d, err := users.Get("a", 3)
	require.NoError(t, err, "the versions before the marker stay")
	require.Equal(t, 2, d.Value.Age)
	d, err = users.AsOf("a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), d.Version)
	for _, v := range []int64{4, 5, 1 << 40} {
		_, err = users.AsOf("a", v)
		require.ErrorIs(t, err, tipkv.ErrNotFound, "AsOf(%d)", v)
	}
	hist := collect(t, users.History("a", tipkv.Query{}))
	require.Equal(t, seq(4, 1), versionsOf(hist))
	require.True(t, hist[0].Deleted)
	require.Equal(t, user{}, hist[0].Value, "a marker has no value")
	require.False(t, hist[1].Deleted)
	require.Equal(t, []string{"b"}, idsOf(collect(t, users.LatestAll(tipkv.Query{}))), "LatestAll skips a deleted document")
	n, err := users.Count("a")
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "the marker is a version kept")

	// A second Delete writes nothing.
	require.NoError(t, users.Delete(db, "a"))
	require.Equal(t, seq(4, 1), versionsOf(collect(t, users.History("a", tipkv.Query{}))))

	// A stale PutIf fails; PutIf(0) means "no live document".
	_, err = users.PutIf(db, "a", user{}, 3)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, "latest version is 4 (a delete marker), expected 3")
	v, err := users.PutIf(db, "a", user{Name: "again"}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), v, "the next Put continues after the marker")
	_, err = users.PutIf(db, "a", user{}, 0)
	require.ErrorIs(t, err, tipkv.ErrConflict, "the document is live again")
	d, err = users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(5), d.Version)
	require.Equal(t, "again", d.Value.Name)

	// PutIf on the marker's own version succeeds too.
	require.NoError(t, users.Delete(db, "a"))
	v, err = users.PutIf(db, "a", user{}, 6)
	require.NoError(t, err)
	require.Equal(t, int64(7), v)

	b, err := users.Latest("b")
	require.NoError(t, err)
	require.Equal(t, int64(2), b.Version, "Delete touches one document only")

	// Delete then Put in one Update, and a Delete inside an Update that
	// fails, which leaves nothing behind.
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		require.NoError(t, users.Delete(bt, "b"))
		require.NoError(t, users.Delete(bt, "b"), "the second sees the first")
		v, err := users.Put(bt, "b", user{Name: "b1"})
		require.Equal(t, int64(4), v)
		return err
	}))
	require.Equal(t, []bool{false, true, false, false}, deletedOf(collect(t, users.History("b", tipkv.Query{}))))
	boom := errors.New("boom")
	require.ErrorIs(t, db.Update(func(bt *tipkv.Batch) error {
		require.NoError(t, users.Delete(bt, "b"))
		return boom
	}), boom)
	v, err = users.Put(db, "b", user{})
	require.NoError(t, err)
	require.Equal(t, int64(5), v, "the failed Update's marker version is given back")
}

// Prune counts markers as versions and never drops the latest one;
// Purge drops everything, and only then do versions start again at 1.
func TestPruneAndPurgeAfterDelete(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "a", 5)
	require.NoError(t, users.Delete(db, "a"))
	n, err := users.Prune(db, "a", 1)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	hist := collect(t, users.History("a", tipkv.Query{}))
	require.Equal(t, []int64{6}, versionsOf(hist))
	require.True(t, hist[0].Deleted, "the marker is the latest version, kept")
	n, err = users.PruneBefore(db, "a", 100)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, users.Delete(db, "a"), "still deleted: nothing written")
	_, err = users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)

	v, err := users.Put(db, "a", user{})
	require.NoError(t, err)
	require.Equal(t, int64(7), v)

	n, err = users.Purge(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Empty(t, collect(t, users.History("a", tipkv.Query{})))
	_, err = users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	n, err = users.Purge(db, "a")
	require.NoError(t, err)
	require.Zero(t, n, "purging a missing document drops nothing")
	v, err = users.Put(db, "a", user{})
	require.NoError(t, err)
	require.Equal(t, int64(1), v, "after Purge versions start again at 1")

	// Purge, Put and Delete in one Update see each other.
	putN(t, users, db, "a", 2)
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		n, err := users.Purge(b, "a")
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		v, err := users.Put(b, "a", user{Name: "new"})
		require.NoError(t, err)
		require.Equal(t, int64(1), v)
		return users.Delete(b, "a")
	}))
	hist = collect(t, users.History("a", tipkv.Query{}))
	require.Equal(t, []bool{true, false}, deletedOf(hist))
	require.Equal(t, seq(2, 1), versionsOf(hist))

	_, err = users.Purge(db, "")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// A value that encodes to the marker byte cannot be Put: it would read as
// a deletion.
func TestPutOfTheMarkerByteIsInvalid(t *testing.T) {
	db := testutil.OpenMem(t)
	blobs, err := versioned.NewCollection[[]byte](db, "blobs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	_, err = blobs.Put(db, "x", []byte{0xc1})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorContains(t, err, "0xC1")
	_, err = blobs.PutIf(db, "x", []byte{0xc1}, 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = blobs.Latest("x")
	require.ErrorIs(t, err, tipkv.ErrNotFound, "nothing was written")
	v, err := blobs.Put(db, "x", []byte{0xc1, 0xc1})
	require.NoError(t, err, "longer values starting with 0xC1 are values")
	require.Equal(t, int64(1), v)

	texts, err := versioned.NewCollection[string](db, "texts", &versioned.Options[string]{Codec: codec.String{}})
	require.NoError(t, err)
	_, err = texts.Put(db, "x", "\xc1")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

func deletedOf[T any](docs []versioned.Doc[T]) []bool {
	var out []bool
	for _, d := range docs {
		out = append(out, d.Deleted)
	}
	return out
}

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

func TestPrune(t *testing.T) {
	db, users := openUsers(t)
	ranges := traceDeletes(t)
	putN(t, users, db, "a", 10)
	putN(t, users, db, "b", 3)

	n, err := users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Equal(t, seq(10, 8), versionsOf(collect(t, users.History("a", tipkv.Query{}))))
	require.Equal(t, [][2]int64{{1, 7}}, ranges.runs())
	require.Zero(t, ranges.rangeCount(), "a short span gets point deletes")

	n, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more to prune")
	require.Len(t, ranges.spans, 7, "and no delete written")

	putN(t, users, db, "a", 2)
	n, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, seq(12, 10), versionsOf(collect(t, users.History("a", tipkv.Query{}))))
	require.Equal(t, [][2]int64{{1, 9}}, ranges.runs(), "a prune starts where the last one ended")

	n, err = users.Prune(db, "a", 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	d, err := users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(12), d.Version, "the latest version is never pruned")

	require.Equal(t, seq(3, 1), versionsOf(collect(t, users.History("b", tipkv.Query{}))), "other documents keep theirs")

	_, err = users.Prune(db, "a", 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	n, err = users.Prune(db, "nobody", 1)
	require.NoError(t, err)
	require.Zero(t, n)
	ranges.requireDisjoint(t)

	// Versions continue after a prune.
	v, err := users.Put(db, "a", user{})
	require.NoError(t, err)
	require.Equal(t, int64(13), v)
}

func TestPruneBeforeBoundaries(t *testing.T) {
	db, users := openUsers(t)
	ranges := traceDeletes(t)
	putN(t, users, db, "a", 10)

	n, err := users.PruneBefore(db, "a", 1)
	require.NoError(t, err)
	require.Zero(t, n, "there is nothing before version 1")

	n, err = users.PruneBefore(db, "a", 4)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.Equal(t, seq(10, 4), versionsOf(collect(t, users.History("a", tipkv.Query{}))), "version 4 itself stays")

	n, err = users.PruneBefore(db, "a", 4)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = users.PruneBefore(db, "a", 2)
	require.NoError(t, err)
	require.Zero(t, n)

	n, err = users.PruneBefore(db, "a", 5)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	n, err = users.PruneBefore(db, "a", 1000)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	require.Equal(t, []int64{10}, versionsOf(collect(t, users.History("a", tipkv.Query{}))), "the latest stays")
	require.Equal(t, [][2]int64{{1, 9}}, ranges.runs())
	require.Len(t, ranges.spans, 9, "one point delete a version")
	ranges.requireDisjoint(t)

	_, err = users.PruneBefore(db, "a", 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// Prunes and Puts inside one Update count each other.
func TestPruneInsideUpdate(t *testing.T) {
	db, users := openUsers(t)
	ranges := traceDeletes(t)
	putN(t, users, db, "a", 4)
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		putN(t, users, b, "a", 2) // 5, 6
		n, err := users.Prune(b, "a", 3)
		require.NoError(t, err)
		require.Equal(t, int64(3), n) // 1..3
		n, err = users.Prune(b, "a", 2)
		require.NoError(t, err)
		require.Equal(t, int64(1), n) // 4
		return nil
	}))
	require.Equal(t, seq(6, 5), versionsOf(collect(t, users.History("a", tipkv.Query{}))))
	require.Equal(t, [][2]int64{{1, 4}}, ranges.runs())
	ranges.requireDisjoint(t)

	// A new document written and pruned in one Update.
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		putN(t, users, b, "new", 5)
		n, err := users.Prune(b, "new", 2)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		return nil
	}))
	require.Equal(t, seq(5, 4), versionsOf(collect(t, users.History("new", tipkv.Query{}))))
}

// Long spans go with one range delete, short ones with point deletes;
// either starts where the last drop ended, so no two ever overlap.
func TestPruneLongSpansWithOneRangeDelete(t *testing.T) {
	defer versioned.SetRangeDeleteMin(4)()
	db, users := openUsers(t)
	ranges := traceDeletes(t)
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
	require.Equal(t, [][2]int64{{1, 1}, {2, 2}, {3, 3}, {4, 9}, {10, 13}}, ranges.spans)
	require.Equal(t, []bool{false, false, false, true, true}, ranges.ranges)
	require.Equal(t, seq(20, 14), versionsOf(collect(t, users.History("a", tipkv.Query{}))))

	n, err = users.Purge(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Equal(t, [2]int64{14, 20}, ranges.spans[len(ranges.spans)-1])
	ranges.requireDisjoint(t)
	require.Empty(t, collect(t, users.History("a", tipkv.Query{})))
}

func TestClosedDB(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	users := newUsers(t, db)
	putN(t, users, db, "a", 1)
	require.NoError(t, db.Close())
	_, err = users.Put(db, "a", user{})
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrClosed)
	require.ErrorIs(t, readErr(users.History("a", tipkv.Query{})), tipkv.ErrClosed)
	require.ErrorIs(t, readErr(users.LatestAll(tipkv.Query{})), tipkv.ErrClosed)
}

func TestVersionsContinueAfterReopen(t *testing.T) {
	db, dir := testutil.OpenDir(t, nil)
	users := newUsers(t, db)
	putN(t, users, db, "a", 3)
	require.NoError(t, db.Close())

	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	defer db.Close()
	users = newUsers(t, db)
	v, err := users.Put(db, "a", user{})
	require.NoError(t, err)
	require.Equal(t, int64(4), v)
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
		d, err := users.Latest("doc")
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
	require.Equal(t, int64(window), first, "one seek an iteration: Latest's")
	require.Equal(t, first, last)
	require.Equal(t, seq(iters, iters-2), versionsOf(collect(t, users.History("doc", tipkv.Query{}))))
}
