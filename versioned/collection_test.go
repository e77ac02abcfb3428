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
	rawSet(t, db, key, []byte{0xc1}) // 0xc1 is never valid msgpack

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

func TestDeleteThenPutStartsAgain(t *testing.T) {
	db, users := openUsers(t)
	require.NoError(t, users.Delete(db, "a"), "deleting a missing document is no error")
	putN(t, users, db, "a", 3)
	putN(t, users, db, "b", 2)
	require.NoError(t, users.Delete(db, "a"))
	_, err := users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.Empty(t, collect(t, users.History("a", tipkv.Query{})))

	v, err := users.Put(db, "a", user{Name: "again"})
	require.NoError(t, err)
	require.Equal(t, int64(1), v, "a deleted document starts again at version 1")
	require.Equal(t, []int64{1}, versionsOf(collect(t, users.History("a", tipkv.Query{}))))

	b, err := users.Latest("b")
	require.NoError(t, err)
	require.Equal(t, int64(2), b.Version, "Delete touches one document only")

	// Delete then Put in one Update.
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		if err := users.Delete(bt, "b"); err != nil {
			return err
		}
		v, err := users.Put(bt, "b", user{Name: "b1"})
		require.Equal(t, int64(1), v)
		return err
	}))
	require.Equal(t, []int64{1}, versionsOf(collect(t, users.History("b", tipkv.Query{}))))
	_, err = users.PutIf(db, "a", user{}, 0)
	require.ErrorIs(t, err, tipkv.ErrConflict)
}

// rangeLog records the range deletes the package writes, decoded as the
// [lo, hi] versions they cover.
type rangeLog struct {
	spans [][2]int64
}

func traceRanges(t *testing.T) *rangeLog {
	l := &rangeLog{}
	restore := versioned.TraceDeleteRanges(func(lo, hi []byte) {
		a, _, err := codec.DecodeDesc(lo[len(lo)-codec.NumberSize:])
		require.NoError(t, err)
		b, _, err := codec.DecodeDesc(hi[len(hi)-codec.NumberSize:])
		require.NoError(t, err)
		// [desc(a), desc(b)) covers the numbers (b, a].
		l.spans = append(l.spans, [2]int64{b + 1, a})
	})
	t.Cleanup(restore)
	return l
}

func (l *rangeLog) requireDisjoint(t *testing.T) {
	t.Helper()
	for i, a := range l.spans {
		for _, b := range l.spans[:i] {
			require.True(t, a[1] < b[0] || b[1] < a[0], "range %v overlaps earlier range %v", a, b)
		}
	}
}

func TestPrune(t *testing.T) {
	db, users := openUsers(t)
	ranges := traceRanges(t)
	putN(t, users, db, "a", 10)
	putN(t, users, db, "b", 3)

	n, err := users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Equal(t, seq(10, 8), versionsOf(collect(t, users.History("a", tipkv.Query{}))))
	require.Equal(t, [][2]int64{{1, 7}}, ranges.spans)

	n, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more to prune")
	require.Len(t, ranges.spans, 1, "and no range written")

	putN(t, users, db, "a", 2)
	n, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, seq(12, 10), versionsOf(collect(t, users.History("a", tipkv.Query{}))))
	require.Equal(t, [][2]int64{{1, 7}, {8, 9}}, ranges.spans, "a prune starts where the last one ended")

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
	ranges := traceRanges(t)
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
	require.Equal(t, [][2]int64{{1, 3}, {4, 4}, {5, 9}}, ranges.spans)
	ranges.requireDisjoint(t)

	_, err = users.PruneBefore(db, "a", 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// Prunes and Puts inside one Update count each other.
func TestPruneInsideUpdate(t *testing.T) {
	db, users := openUsers(t)
	ranges := traceRanges(t)
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
	require.Equal(t, [][2]int64{{1, 3}, {4, 4}}, ranges.spans)

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
