package tipkvtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// documentDeleteCases returns the tests of deleting and dropping versions:
// Delete's marker, Prune, PruneBefore and Purge, alone and inside
// Updates.
func documentDeleteCases() []testCase {
	return []testCase{
		{"DeleteWritesAMarker", checked(testDeleteWritesAMarker)},
		{"DeleteReturnsTheMarkersVersion", checked(testDeleteReturnsTheMarkersVersion)},
		{"PruneAndPurgeAfterDelete", checked(testPruneAndPurgeAfterDelete)},
		{"Prune", checked(testPrune)},
		{"PruneBefore", checked(testPruneBefore)},
		{"PruneInsideUpdate", checked(testPruneInsideUpdate)},
	}
}

// Delete writes a marker as the next version: the history stays, reads
// answer ErrNotFound where they would return the marker, and the next Put
// continues after it, so a version number never comes back.
func testDeleteWritesAMarker(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	v, err := users.Delete(db, "a")
	require.NoError(t, err, "deleting a missing document is no error")
	require.Zero(t, v, "a missing document has no version")
	require.Empty(t, testutil.Collect(t, users.History("a", tipkv.Query{})), "and writes nothing")

	putN(t, users, db, "a", 3)
	putN(t, users, db, "b", 2)
	v, err = users.Delete(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(4), v, "the marker's version")

	_, err = users.Latest("a")
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
	hist := testutil.Collect(t, users.History("a", tipkv.Query{}))
	require.Equal(t, testutil.Range(4, 1), versionsOf(hist))
	require.True(t, hist[0].Deleted)
	require.Equal(t, person{}, hist[0].Value, "a marker has no value")
	require.False(t, hist[1].Deleted)
	require.Equal(t, []string{"b"}, idsOf(testutil.Collect(t, users.LatestAll(tipkv.Query{}))), "LatestAll skips a deleted document")
	n, err := users.Count("a")
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "the marker is a version kept")

	// A second Delete writes nothing and returns the marker's version.
	v, err = users.Delete(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(4), v)
	require.Equal(t, testutil.Range(4, 1), versionsOf(testutil.Collect(t, users.History("a", tipkv.Query{}))))

	// A stale PutIf fails; PutIf(0) means "no live document".
	_, err = users.PutIf(db, "a", person{}, 3)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, "latest version is 4 (a delete marker), expected 3")
	v, err = users.PutIf(db, "a", person{Name: "again"}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), v, "the next Put continues after the marker")
	_, err = users.PutIf(db, "a", person{}, 0)
	require.ErrorIs(t, err, tipkv.ErrConflict, "the document is live again")
	d, err = users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(5), d.Version)
	require.Equal(t, "again", d.Value.Name)

	// PutIf on the marker's own version succeeds too.
	v, err = users.Delete(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(6), v)
	v, err = users.PutIf(db, "a", person{}, 6)
	require.NoError(t, err)
	require.Equal(t, int64(7), v)

	bd, err := users.Latest("b")
	require.NoError(t, err)
	require.Equal(t, int64(2), bd.Version, "Delete touches one document only")

	// Delete then Put in one Update, and a Delete inside an Update that
	// fails, which leaves nothing behind.
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		v, err := users.Delete(bt, "b")
		require.NoError(t, err)
		require.Equal(t, int64(3), v)
		v, err = users.Delete(bt, "b")
		require.NoError(t, err)
		require.Equal(t, int64(3), v, "the second sees the first")
		v, err = users.Put(bt, "b", person{Name: "b1"})
		require.Equal(t, int64(4), v)
		return err
	}))
	require.Equal(t, []bool{false, true, false, false}, deletedOf(testutil.Collect(t, users.History("b", tipkv.Query{}))))
	boom := errors.New("boom")
	require.ErrorIs(t, db.Update(func(bt *tipkv.Batch) error {
		_, err := users.Delete(bt, "b")
		require.NoError(t, err)
		return boom
	}), boom)
	v, err = users.Put(db, "b", person{})
	require.NoError(t, err)
	require.Equal(t, int64(5), v, "the failed Update's marker version is given back")
}

// Delete returns the version of the marker it wrote, the one Latest's
// error names and History yields newest, alone and inside an Update (the
// version returned in the Update is the one it commits); when it writes
// nothing it returns 0 for a missing or purged document and the marker's
// version for a deleted one.
func testDeleteReturnsTheMarkersVersion(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	marker := func(id string) versioned.Doc[person] {
		t.Helper()
		hist := testutil.Collect(t, users.History(id, tipkv.Query{Limit: 1}))
		require.Len(t, hist, 1)
		require.True(t, hist[0].Deleted, "%q: the newest version is a marker", id)
		return hist[0]
	}

	v, err := users.Delete(db, "a")
	require.NoError(t, err)
	require.Zero(t, v, "a missing document: nothing written, no version")

	putN(t, users, db, "a", 2)
	v, err = users.Delete(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(3), v)
	require.Equal(t, v, marker("a").Version)
	_, err = users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.ErrorContains(t, err, fmt.Sprintf("delete marker at version %d", v))
	again, err := users.Delete(db, "a")
	require.NoError(t, err)
	require.Equal(t, v, again, "already deleted: nothing written, the marker's version")
	n, err := users.Count("a")
	require.NoError(t, err)
	require.Equal(t, int64(3), n)

	// Inside an Update: a Put then a Delete, twice the same marker, and a
	// Delete of a document the Update never saw written.
	var inside, twice, missing int64
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		p, err := users.Put(bt, "a", person{Name: "back"})
		require.NoError(t, err)
		require.Equal(t, int64(4), p)
		if inside, err = users.Delete(bt, "a"); err != nil {
			return err
		}
		if twice, err = users.Delete(bt, "a"); err != nil {
			return err
		}
		missing, err = users.Delete(bt, "none")
		return err
	}))
	require.Equal(t, int64(5), inside, "the version after the Update's own Put")
	require.Equal(t, inside, twice, "the second Delete sees the first's marker")
	require.Zero(t, missing)
	require.Equal(t, inside, marker("a").Version, "the version returned in the Update is the one committed")
	require.Empty(t, testutil.Collect(t, users.History("none", tipkv.Query{})))

	// An Update that fails gives the marker's version back.
	boom := errors.New("boom")
	require.ErrorIs(t, db.Update(func(bt *tipkv.Batch) error {
		p, err := users.Put(bt, "a", person{})
		require.NoError(t, err)
		v, err := users.Delete(bt, "a")
		require.NoError(t, err)
		require.Equal(t, p+1, v)
		return boom
	}), boom)
	require.Equal(t, inside, marker("a").Version)
	p, err := users.Put(db, "a", person{})
	require.NoError(t, err)
	require.Equal(t, int64(6), p)
	v, err = users.Delete(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(7), v, "the failed Update's versions were given back")

	// A marker written with metadata carries it; after Purge there is no
	// version to return.
	m := tipkv.Metadata{Author: "ada", Reason: "spam"}
	putN(t, users, db, "b", 1)
	v, err = users.Delete(tipkv.WithMetadata(db, m), "b")
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	got, err := marker("b").Metadata()
	require.NoError(t, err)
	require.Equal(t, m, got)
	_, err = users.Purge(db, "b")
	require.NoError(t, err)
	v, err = users.Delete(db, "b")
	require.NoError(t, err)
	require.Zero(t, v, "a purged document: nothing written, no version")
	require.Empty(t, testutil.Collect(t, users.History("b", tipkv.Query{})))
}

// Prune counts markers as versions and never drops the latest one;
// Purge drops everything, and only then do versions start again at 1.
func testPruneAndPurgeAfterDelete(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 5)
	v, err := users.Delete(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(6), v)
	n, err := users.Prune(db, "a", 1)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	hist := testutil.Collect(t, users.History("a", tipkv.Query{}))
	require.Equal(t, []int64{6}, versionsOf(hist))
	require.True(t, hist[0].Deleted, "the marker is the latest version, kept")
	n, err = users.PruneBefore(db, "a", 100)
	require.NoError(t, err)
	require.Zero(t, n)
	v, err = users.Delete(db, "a")
	require.NoError(t, err, "still deleted: nothing written")
	require.Equal(t, int64(6), v, "the pruned history's marker")
	_, err = users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)

	v, err = users.Put(db, "a", person{})
	require.NoError(t, err)
	require.Equal(t, int64(7), v)

	n, err = users.Purge(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Empty(t, testutil.Collect(t, users.History("a", tipkv.Query{})))
	_, err = users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	n, err = users.Purge(db, "a")
	require.NoError(t, err)
	require.Zero(t, n, "purging a missing document drops nothing")
	v, err = users.Put(db, "a", person{})
	require.NoError(t, err)
	require.Equal(t, int64(1), v, "after Purge versions start again at 1")

	// Purge, Put and Delete in one Update see each other.
	putN(t, users, db, "a", 2)
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		n, err := users.Purge(bt, "a")
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		v, err := users.Put(bt, "a", person{Name: "new"})
		require.NoError(t, err)
		require.Equal(t, int64(1), v)
		v, err = users.Delete(bt, "a")
		require.NoError(t, err)
		require.Equal(t, int64(2), v)
		return err
	}))
	hist = testutil.Collect(t, users.History("a", tipkv.Query{}))
	require.Equal(t, []bool{true, false}, deletedOf(hist))
	require.Equal(t, testutil.Range(2, 1), versionsOf(hist))

	_, err = users.Purge(db, "")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// Prune(keep) drops all but the keep newest versions of one document,
// never the latest; versions continue after it, keep < 1 is ErrInvalid,
// and a long run pruned then purged leaves nothing.
func testPrune(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 10)
	putN(t, users, db, "b", 3)

	n, err := users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Equal(t, testutil.Range(10, 8), versionsOf(testutil.Collect(t, users.History("a", tipkv.Query{}))))

	n, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more to prune")

	putN(t, users, db, "a", 2)
	n, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, testutil.Range(12, 10), versionsOf(testutil.Collect(t, users.History("a", tipkv.Query{}))))

	n, err = users.Prune(db, "a", 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	d, err := users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(12), d.Version, "the latest version is never pruned")

	require.Equal(t, testutil.Range(3, 1), versionsOf(testutil.Collect(t, users.History("b", tipkv.Query{}))), "other documents keep theirs")

	_, err = users.Prune(db, "a", 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	n, err = users.Prune(db, "nobody", 1)
	require.NoError(t, err)
	require.Zero(t, n)

	// Versions continue after a prune.
	v, err := users.Put(db, "a", person{})
	require.NoError(t, err)
	require.Equal(t, int64(13), v)

	// A long run, and Purge after it.
	putN(t, users, db, "long", 100)
	n, err = users.Prune(db, "long", 7)
	require.NoError(t, err)
	require.Equal(t, int64(93), n)
	require.Equal(t, testutil.Range(100, 94), versionsOf(requireDense(t, users, "long")))
	n, err = users.Purge(db, "long")
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Empty(t, testutil.Collect(t, users.History("long", tipkv.Query{})))
}

// PruneBefore(v) drops the versions below v, keeping v itself and always
// the latest; v < 1 is ErrInvalid.
func testPruneBefore(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 10)

	n, err := users.PruneBefore(db, "a", 1)
	require.NoError(t, err)
	require.Zero(t, n, "there is nothing before version 1")

	n, err = users.PruneBefore(db, "a", 4)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.Equal(t, testutil.Range(10, 4), versionsOf(testutil.Collect(t, users.History("a", tipkv.Query{}))), "version 4 itself stays")

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
	require.Equal(t, []int64{10}, versionsOf(testutil.Collect(t, users.History("a", tipkv.Query{}))), "the latest stays")

	_, err = users.PruneBefore(db, "a", 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// Prunes and Puts inside one Update count each other.
func testPruneInsideUpdate(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 4)
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		putN(t, users, bt, "a", 2) // 5, 6
		n, err := users.Prune(bt, "a", 3)
		require.NoError(t, err)
		require.Equal(t, int64(3), n) // 1..3
		n, err = users.Prune(bt, "a", 2)
		require.NoError(t, err)
		require.Equal(t, int64(1), n) // 4
		return nil
	}))
	require.Equal(t, testutil.Range(6, 5), versionsOf(testutil.Collect(t, users.History("a", tipkv.Query{}))))

	// A new document written and pruned in one Update.
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		putN(t, users, bt, "new", 5)
		n, err := users.Prune(bt, "new", 2)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		return nil
	}))
	require.Equal(t, testutil.Range(5, 4), versionsOf(testutil.Collect(t, users.History("new", tipkv.Query{}))))
}
