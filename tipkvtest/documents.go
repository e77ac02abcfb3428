package tipkvtest

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/versioned"
)

// documentCases returns the documents tests: versions, reads, deletes and
// drops, snapshots, the model test, the concurrency tests and the shared
// engines' tests. Each ends with its stores checked healthy (checked).
// What is about Pebble itself (seek counts, bloom filters, how drops are
// written) stays in versioned's own tests.
func documentCases() []testCase {
	return append([]testCase{
		{"PutWritesNextVersion", checked(testPutWritesNextVersion)},
		{"PutIf", checked(testPutIf)},
		{"AsOf", checked(testAsOf)},
		{"IDsAreBytes", checked(testIDsAreBytes)},
		{"ValueThatDoesNotDecodeIsCorrupt", checked(testValueThatDoesNotDecodeIsCorrupt)},
		{"UpdateWritesManyDocumentsAtomically", checked(testUpdateWritesManyDocumentsAtomically)},
		{"UpdatePanicGivesVersionsBack", checked(testUpdatePanicGivesVersionsBack)},
		{"DeleteWritesAMarker", checked(testDeleteWritesAMarker)},
		{"PruneAndPurgeAfterDelete", checked(testPruneAndPurgeAfterDelete)},
		{"Prune", checked(testPrune)},
		{"PruneBefore", checked(testPruneBefore)},
		{"PruneInsideUpdate", checked(testPruneInsideUpdate)},
		{"VersionsContinueAfterReopen", checked(testVersionsContinueAfterReopen)},
		{"HistoryPages", checked(testHistoryPages)},
		{"HistoryStopsWhenTheConsumerDoes", checked(testHistoryStopsWhenTheConsumerDoes)},
		{"BadQueriesAndCursors", checked(testBadQueriesAndCursors)},
		{"LatestAll", checked(testLatestAll)},
		{"Count", checked(testCount)},
		{"LatestMany", checked(testLatestMany)},
		{"HistoryPage", checked(testHistoryPage)},
		{"CollectionsAndStreams", checked(testCollectionsAndStreams)},
		{"SnapshotReadsAgree", checked(testSnapshotReadsAgree)},
		{"DefaultCodecNames", checked(testDefaultCodecNames)},
		{"Model", checked(testDocumentModel)},
		{"MissFilterHidesNothing", checked(testMissFilterHidesNothing)},
		{"ConcurrentPutsAreDense", checked(testConcurrentPutsAreDense)},
		{"ConcurrentPutsWithAbortsStayDense", checked(testConcurrentPutsWithAbortsStayDense)},
		{"ConcurrentPutIf", checked(testConcurrentPutIf)},
		{"UpdatesInOppositeOrdersDoNotDeadlock", checked(testUpdatesInOppositeOrdersDoNotDeadlock)},
		{"ConcurrentPutsAndDeletesAreDense", checked(testConcurrentPutsAndDeletesAreDense)},
		{"SharedWriters", checked(testSharedWriters)},
		{"SharedPutIfAfterAnotherHandle", checked(testSharedPutIfAfterAnotherHandle)},
		{"SharedFaults", checked(testSharedFaults)},
	}, watchCases()...)
}

// person is the document type of these tests.
type person struct {
	Name string `msgpack:"name"`
	Age  int    `msgpack:"age"`
}

func people(t testing.TB, db *tipkv.DB) *versioned.Collection[person] {
	t.Helper()
	c, err := versioned.NewCollection[person](db, "users", nil)
	require.NoError(t, err)
	return c
}

func openPeople(t testing.TB, b backend) (*tipkv.DB, *versioned.Collection[person]) {
	t.Helper()
	db := b.Open(t, nil)
	return db, people(t, db)
}

// drain reads a read to its end, failing the test on an error.
func drain[V any](t testing.TB, seq iter.Seq2[V, error]) []V {
	t.Helper()
	var out []V
	for v, err := range seq {
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

// drainErr reads a read to its end and returns its error, checking that it
// came last.
func drainErr[V any](t testing.TB, seq iter.Seq2[V, error]) error {
	t.Helper()
	var err error
	for _, e := range seq {
		require.NoError(t, err, "an error was not the last pair")
		err = e
	}
	return err
}

func versionsOf[T any](docs []versioned.Doc[T]) []int64 {
	var out []int64
	for _, d := range docs {
		out = append(out, d.Version)
	}
	return out
}

func idsOf[T any](docs []versioned.Doc[T]) []string {
	var out []string
	for _, d := range docs {
		out = append(out, d.ID)
	}
	return out
}

func deletedOf[T any](docs []versioned.Doc[T]) []bool {
	var out []bool
	for _, d := range docs {
		out = append(out, d.Deleted)
	}
	return out
}

// run returns from, from+1, ..., to, or from, from-1, ..., to.
func run(from, to int64) []int64 {
	var out []int64
	if from <= to {
		for v := from; v <= to; v++ {
			out = append(out, v)
		}
	} else {
		for v := from; v >= to; v-- {
			out = append(out, v)
		}
	}
	return out
}

// putN writes versions until the document has n more.
func putN(t testing.TB, c *versioned.Collection[person], w tipkv.Writer, id string, n int) {
	t.Helper()
	for i := range n {
		_, err := c.Put(w, id, person{Name: id, Age: i})
		require.NoError(t, err)
	}
}

// rawSet writes a key through the storage contract, for corrupting a store.
func rawSet(t testing.TB, db *tipkv.DB, key, value []byte) {
	t.Helper()
	require.NoError(t, link.Write(db, func(tx *link.Tx) error { return tx.Batch.Set(key, value) }))
}

// requireDense checks that the versions of the document id are dense, from
// the oldest kept to the latest, and returns its history.
func requireDense[T any](t testing.TB, c *versioned.Collection[T], id string) []versioned.Doc[T] {
	t.Helper()
	hist := drain(t, c.History(id, tipkv.Query{}))
	if len(hist) > 0 {
		require.Equal(t, run(hist[0].Version, hist[len(hist)-1].Version), versionsOf(hist), "versions of %q are dense", id)
	}
	n, err := c.Count(id)
	require.NoError(t, err)
	require.Equal(t, int64(len(hist)), n, "Count(%q)", id)
	return hist
}

func testPutWritesNextVersion(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	for want := int64(1); want <= 3; want++ {
		v, err := users.Put(db, "ada", person{Name: "Ada", Age: int(want)})
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
	d, err := users.Latest("ada")
	require.NoError(t, err)
	require.Equal(t, "ada", d.ID)
	require.Equal(t, int64(3), d.Version)
	require.Equal(t, person{Name: "Ada", Age: 3}, d.Value)

	d, err = users.Get("ada", 2)
	require.NoError(t, err)
	require.Equal(t, person{Name: "Ada", Age: 2}, d.Value)

	_, err = users.Get("ada", 4)
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	_, err = users.Get("ada", 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = users.Latest("bob")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.ErrorContains(t, err, `"bob"`)
}

func testPutIf(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	v, err := users.PutIf(db, "a", person{Age: 1}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)

	_, err = users.PutIf(db, "a", person{Age: 2}, 0)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, "latest version is 1, expected 0")

	v, err = users.PutIf(db, "a", person{Age: 2}, 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)

	_, err = users.PutIf(db, "a", person{Age: 3}, 1)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	_, err = users.PutIf(db, "a", person{Age: 3}, 5)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	_, err = users.PutIf(db, "a", person{}, -1)
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	d, err := users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(2), d.Version, "a failed PutIf writes nothing")
	require.Equal(t, 2, d.Value.Age)

	// PutIf on a document never written, with a version it does not have.
	_, err = users.PutIf(db, "new", person{}, 3)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, "latest version is 0, expected 3")
	require.Empty(t, drain(t, users.History("new", tipkv.Query{})))
}

func testAsOf(t *testing.T, b backend) {
	db, users := openPeople(t, b)
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
func testIDsAreBytes(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	ids := []string{"\x00", "\x00\x00", "\x00\x01", "\xff", "\xff\xff", "a\x00b", "\xc3\x28", "doc-1", "doc-10", "doc-1\x00", strings.Repeat("x", versioned.MaxIDSize)}
	for i, id := range ids {
		putN(t, users, db, id, i+1)
	}
	for i, id := range ids {
		d, err := users.Latest(id)
		require.NoError(t, err, "%q", id)
		require.Equal(t, id, d.ID)
		require.Equal(t, int64(i+1), d.Version, "%q", id)
		require.Len(t, drain(t, users.History(id, tipkv.Query{})), i+1, "%q", id)
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	require.Equal(t, want, idsOf(drain(t, users.LatestAll(tipkv.Query{}))), "LatestAll is in bytewise id order")
}

func versionKey(coll, id string, v int64) []byte {
	return codec.AppendDesc(codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), coll), id), v)
}

func testValueThatDoesNotDecodeIsCorrupt(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 2)
	rawSet(t, db, versionKey("users", "a", 3), []byte{0xc1, 0x01}) // 0xc1 is never valid msgpack (alone, it is a delete marker)
	if b.Reopen != nil {
		// On an exclusive engine the DB's memory is the truth: a write
		// made around the package is seen by a DB opened after it.
		db = b.Reopen(t, db, nil)
		users = people(t, db)
	}

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

func testUpdateWritesManyDocumentsAtomically(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	boom := errors.New("boom")
	err := db.Update(func(bt *tipkv.Batch) error {
		v, err := users.Put(bt, "a", person{Name: "a"})
		require.NoError(t, err)
		require.Equal(t, int64(1), v)
		v, err = users.Put(bt, "a", person{Name: "a2"})
		require.NoError(t, err)
		require.Equal(t, int64(2), v, "a second Put in one Update sees the first")
		_, err = users.Put(bt, "b", person{Name: "b"})
		require.NoError(t, err)
		_, err = users.Latest("a")
		require.ErrorIs(t, err, tipkv.ErrNotFound, "reads see committed writes only")
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)

	// The aborted Update's versions are given back.
	v, err := users.Put(db, "a", person{Name: "a"})
	require.NoError(t, err)
	require.Equal(t, int64(1), v)

	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		if _, err := users.Put(bt, "a", person{Name: "a2"}); err != nil {
			return err
		}
		if _, err := users.PutIf(bt, "a", person{Name: "a3"}, 2); err != nil {
			return err
		}
		_, err := users.PutIf(bt, "b", person{Name: "b"}, 0)
		return err
	}))
	a, err := users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(3), a.Version)
	bd, err := users.Latest("b")
	require.NoError(t, err)
	require.Equal(t, int64(1), bd.Version)

	// A PutIf that conflicts with the Update's own earlier Put.
	err = db.Update(func(bt *tipkv.Batch) error {
		if _, err := users.Put(bt, "a", person{}); err != nil {
			return err
		}
		_, err := users.PutIf(bt, "a", person{}, 3)
		return err
	})
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, "latest version is 4, expected 3")
	requireDense(t, users, "a")
}

func testUpdatePanicGivesVersionsBack(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	require.Panics(t, func() {
		_ = db.Update(func(bt *tipkv.Batch) error {
			_, _ = users.Put(bt, "a", person{})
			panic("boom")
		})
	})
	v, err := users.Put(db, "a", person{})
	require.NoError(t, err, "the lock was released by the panicking Update")
	require.Equal(t, int64(1), v)
}

// Delete writes a marker as the next version: the history stays, reads
// answer ErrNotFound where they would return the marker, and the next Put
// continues after it, so a version number never comes back.
func testDeleteWritesAMarker(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	require.NoError(t, users.Delete(db, "a"), "deleting a missing document is no error")
	require.Empty(t, drain(t, users.History("a", tipkv.Query{})), "and writes nothing")

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
	hist := drain(t, users.History("a", tipkv.Query{}))
	require.Equal(t, run(4, 1), versionsOf(hist))
	require.True(t, hist[0].Deleted)
	require.Equal(t, person{}, hist[0].Value, "a marker has no value")
	require.False(t, hist[1].Deleted)
	require.Equal(t, []string{"b"}, idsOf(drain(t, users.LatestAll(tipkv.Query{}))), "LatestAll skips a deleted document")
	n, err := users.Count("a")
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "the marker is a version kept")

	// A second Delete writes nothing.
	require.NoError(t, users.Delete(db, "a"))
	require.Equal(t, run(4, 1), versionsOf(drain(t, users.History("a", tipkv.Query{}))))

	// A stale PutIf fails; PutIf(0) means "no live document".
	_, err = users.PutIf(db, "a", person{}, 3)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, "latest version is 4 (a delete marker), expected 3")
	v, err := users.PutIf(db, "a", person{Name: "again"}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), v, "the next Put continues after the marker")
	_, err = users.PutIf(db, "a", person{}, 0)
	require.ErrorIs(t, err, tipkv.ErrConflict, "the document is live again")
	d, err = users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(5), d.Version)
	require.Equal(t, "again", d.Value.Name)

	// PutIf on the marker's own version succeeds too.
	require.NoError(t, users.Delete(db, "a"))
	v, err = users.PutIf(db, "a", person{}, 6)
	require.NoError(t, err)
	require.Equal(t, int64(7), v)

	bd, err := users.Latest("b")
	require.NoError(t, err)
	require.Equal(t, int64(2), bd.Version, "Delete touches one document only")

	// Delete then Put in one Update, and a Delete inside an Update that
	// fails, which leaves nothing behind.
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		require.NoError(t, users.Delete(bt, "b"))
		require.NoError(t, users.Delete(bt, "b"), "the second sees the first")
		v, err := users.Put(bt, "b", person{Name: "b1"})
		require.Equal(t, int64(4), v)
		return err
	}))
	require.Equal(t, []bool{false, true, false, false}, deletedOf(drain(t, users.History("b", tipkv.Query{}))))
	boom := errors.New("boom")
	require.ErrorIs(t, db.Update(func(bt *tipkv.Batch) error {
		require.NoError(t, users.Delete(bt, "b"))
		return boom
	}), boom)
	v, err = users.Put(db, "b", person{})
	require.NoError(t, err)
	require.Equal(t, int64(5), v, "the failed Update's marker version is given back")
}

// Prune counts markers as versions and never drops the latest one;
// Purge drops everything, and only then do versions start again at 1.
func testPruneAndPurgeAfterDelete(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 5)
	require.NoError(t, users.Delete(db, "a"))
	n, err := users.Prune(db, "a", 1)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	hist := drain(t, users.History("a", tipkv.Query{}))
	require.Equal(t, []int64{6}, versionsOf(hist))
	require.True(t, hist[0].Deleted, "the marker is the latest version, kept")
	n, err = users.PruneBefore(db, "a", 100)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, users.Delete(db, "a"), "still deleted: nothing written")
	_, err = users.Latest("a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)

	v, err := users.Put(db, "a", person{})
	require.NoError(t, err)
	require.Equal(t, int64(7), v)

	n, err = users.Purge(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Empty(t, drain(t, users.History("a", tipkv.Query{})))
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
		return users.Delete(bt, "a")
	}))
	hist = drain(t, users.History("a", tipkv.Query{}))
	require.Equal(t, []bool{true, false}, deletedOf(hist))
	require.Equal(t, run(2, 1), versionsOf(hist))

	_, err = users.Purge(db, "")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

func testPrune(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 10)
	putN(t, users, db, "b", 3)

	n, err := users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Equal(t, run(10, 8), versionsOf(drain(t, users.History("a", tipkv.Query{}))))

	n, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more to prune")

	putN(t, users, db, "a", 2)
	n, err = users.Prune(db, "a", 3)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, run(12, 10), versionsOf(drain(t, users.History("a", tipkv.Query{}))))

	n, err = users.Prune(db, "a", 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	d, err := users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(12), d.Version, "the latest version is never pruned")

	require.Equal(t, run(3, 1), versionsOf(drain(t, users.History("b", tipkv.Query{}))), "other documents keep theirs")

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
	require.Equal(t, run(100, 94), versionsOf(requireDense(t, users, "long")))
	n, err = users.Purge(db, "long")
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Empty(t, drain(t, users.History("long", tipkv.Query{})))
}

func testPruneBefore(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 10)

	n, err := users.PruneBefore(db, "a", 1)
	require.NoError(t, err)
	require.Zero(t, n, "there is nothing before version 1")

	n, err = users.PruneBefore(db, "a", 4)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.Equal(t, run(10, 4), versionsOf(drain(t, users.History("a", tipkv.Query{}))), "version 4 itself stays")

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
	require.Equal(t, []int64{10}, versionsOf(drain(t, users.History("a", tipkv.Query{}))), "the latest stays")

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
	require.Equal(t, run(6, 5), versionsOf(drain(t, users.History("a", tipkv.Query{}))))

	// A new document written and pruned in one Update.
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		putN(t, users, bt, "new", 5)
		n, err := users.Prune(bt, "new", 2)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		return nil
	}))
	require.Equal(t, run(5, 4), versionsOf(drain(t, users.History("new", tipkv.Query{}))))
}

func testVersionsContinueAfterReopen(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 3)
	require.NoError(t, users.Delete(db, "b"))
	putN(t, users, db, "b", 2)
	require.NoError(t, users.Delete(db, "b"))

	db = b.Reopen(t, db, nil)
	users = people(t, db)
	v, err := users.Put(db, "a", person{})
	require.NoError(t, err)
	require.Equal(t, int64(4), v)
	_, err = users.PutIf(db, "b", person{}, 2)
	require.ErrorIs(t, err, tipkv.ErrConflict, "the marker is read back")
	v, err = users.PutIf(db, "b", person{}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(4), v)
}

// pages reads History page by page, passing each page's last cursor on.
func pages(t *testing.T, users *versioned.Collection[person], id string, q tipkv.Query) [][]int64 {
	t.Helper()
	var out [][]int64
	for range 100 {
		page := drain(t, users.History(id, q))
		if len(page) == 0 {
			return out
		}
		out = append(out, versionsOf(page))
		q.After = page[len(page)-1].Cursor()
	}
	t.Fatal("no end of pages")
	return nil
}

func testHistoryPages(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 25)
	putN(t, users, db, "b", 3)

	require.Equal(t, [][]int64{run(25, 16), run(15, 6), run(5, 1)},
		pages(t, users, "a", tipkv.Query{Limit: 10}))
	require.Equal(t, [][]int64{run(20, 14), run(13, 7), run(6, 5)},
		pages(t, users, "a", tipkv.Query{Limit: 7, From: 5, To: 20}))
	require.Equal(t, [][]int64{run(25, 1)}, pages(t, users, "a", tipkv.Query{}))
	require.Equal(t, [][]int64{{7}}, pages(t, users, "a", tipkv.Query{From: 7, To: 7}))
	require.Equal(t, [][]int64{run(25, 24)}, pages(t, users, "a", tipkv.Query{From: 24, To: 1000}))
	require.Empty(t, pages(t, users, "a", tipkv.Query{From: 26}))
	require.Empty(t, pages(t, users, "nobody", tipkv.Query{Limit: 3}))

	// Versions written between pages do not shift the next page.
	first := drain(t, users.History("a", tipkv.Query{Limit: 5}))
	putN(t, users, db, "a", 3)
	next := drain(t, users.History("a", tipkv.Query{Limit: 5, After: first[len(first)-1].Cursor()}))
	require.Equal(t, run(20, 16), versionsOf(next))

	// A Latest, Get or AsOf result continues into the older versions.
	d, err := users.AsOf("a", 10)
	require.NoError(t, err)
	require.Equal(t, run(9, 7), versionsOf(drain(t, users.History("a", tipkv.Query{Limit: 3, After: d.Cursor()}))))

	// The last version's cursor ends the read.
	last := drain(t, users.History("a", tipkv.Query{From: 1, To: 1}))
	require.Empty(t, drain(t, users.History("a", tipkv.Query{After: last[0].Cursor()})))
}

func testHistoryStopsWhenTheConsumerDoes(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 10)
	n := 0
	for d, err := range users.History("a", tipkv.Query{}) {
		require.NoError(t, err)
		require.Equal(t, int64(10-n), d.Version)
		if n++; n == 3 {
			break
		}
	}
	require.Equal(t, 3, n)
}

func testBadQueriesAndCursors(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 5)
	putN(t, users, db, "b", 5)
	other, err := versioned.NewCollection[person](db, "other", nil)
	require.NoError(t, err)
	putN(t, other, db, "a", 5)
	feed, err := versioned.NewFeed[person](db, nil)
	require.NoError(t, err)
	_, err = feed.Append(db, "a", person{})
	require.NoError(t, err)

	hist := drain(t, users.History("a", tipkv.Query{Limit: 2}))
	all := drain(t, users.LatestAll(tipkv.Query{Limit: 1}))
	events := drain(t, feed.Newest("a", tipkv.Query{}))
	otherHist := drain(t, other.History("a", tipkv.Query{Limit: 1}))
	c := string(hist[1].Cursor())

	for name, q := range map[string]tipkv.Query{
		"negative limit":            {Limit: -1},
		"from after to":             {From: 5, To: 4},
		"negative from":             {From: -1},
		"negative to":               {To: -2},
		"prefix":                    {Prefix: "a"},
		"garbage cursor":            {After: "!!!"},
		"empty base64 cursor":       {After: "AA"},
		"truncated cursor":          {After: tipkv.Cursor(c[:len(c)-1])},
		"flipped cursor":            {After: tipkv.Cursor(flip(c))},
		"long cursor":               {After: tipkv.Cursor(make([]byte, 5000))},
		"other document's cursor":   {After: drain(t, users.History("b", tipkv.Query{Limit: 1}))[0].Cursor()},
		"other collection's cursor": {After: otherHist[0].Cursor()},
		"LatestAll cursor":          {After: all[0].Cursor()},
		"feed cursor":               {After: events[0].Cursor()},
	} {
		err := drainErr(t, users.History("a", q))
		require.ErrorIs(t, err, tipkv.ErrInvalid, name)
		require.ErrorContains(t, err, `"a"`, name)
	}
	for name, q := range map[string]tipkv.Query{
		"from":            {From: 1},
		"to":              {To: 3},
		"negative limit":  {Limit: -1},
		"history cursor":  {After: hist[0].Cursor()},
		"garbage cursor":  {After: "%%%"},
		"other coll's":    {After: drain(t, other.LatestAll(tipkv.Query{}))[0].Cursor()},
		"a feed's cursor": {After: events[0].Cursor()},
	} {
		require.ErrorIs(t, drainErr(t, users.LatestAll(q)), tipkv.ErrInvalid, name)
	}
	require.Empty(t, versioned.Doc[person]{}.Cursor())
}

// flip changes one character of a cursor in the middle.
func flip(c string) string {
	b := []byte(c)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func testLatestAll(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("u%02d", i)
		ids = append(ids, id)
		putN(t, users, db, id, 1+i%7)
	}
	putN(t, users, db, "v", 2)
	other, err := versioned.NewCollection[person](db, "userz", nil)
	require.NoError(t, err)
	putN(t, other, db, "u00", 9)

	docs := drain(t, users.LatestAll(tipkv.Query{}))
	require.Len(t, docs, 31)
	for i, id := range ids {
		require.Equal(t, id, docs[i].ID)
		require.Equal(t, int64(1+i%7), docs[i].Version)
		require.Equal(t, i%7, docs[i].Value.Age)
	}
	require.Equal(t, "v", docs[30].ID)

	// Prefix and pages.
	q := tipkv.Query{Prefix: "u1", Limit: 4}
	var got []string
	for range 10 {
		page := drain(t, users.LatestAll(q))
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 4)
		got = append(got, idsOf(page)...)
		q.After = page[len(page)-1].Cursor()
	}
	require.Equal(t, ids[10:20], got)
	require.Empty(t, drain(t, users.LatestAll(tipkv.Query{Prefix: "w"})))

	// A cursor from outside the prefix's range.
	require.Empty(t, drain(t, users.LatestAll(tipkv.Query{Prefix: "u", After: docs[30].Cursor()})))
	rest := drain(t, users.LatestAll(tipkv.Query{Prefix: "v", After: docs[0].Cursor()}))
	require.Len(t, rest, 1)

	// Pruned and deleted documents.
	_, err = users.Prune(db, "u06", 1)
	require.NoError(t, err)
	require.NoError(t, users.Delete(db, "u07"))
	docs = drain(t, users.LatestAll(tipkv.Query{Prefix: "u0"}))
	require.Len(t, docs, 9)
	require.Equal(t, "u06", docs[6].ID)
	require.Equal(t, int64(7), docs[6].Version)
	require.Equal(t, "u08", docs[7].ID)
}

// Count is latest-oldest+1, prunes and markers counted.
func testCount(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	n, err := users.Count("a")
	require.NoError(t, err)
	require.Zero(t, n)
	putN(t, users, db, "a", 10)
	putN(t, users, db, "a\x00", 3)
	_, err = users.PruneBefore(db, "a", 4)
	require.NoError(t, err)
	n, err = users.Count("a")
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.NoError(t, users.Delete(db, "a"))
	n, err = users.Count("a")
	require.NoError(t, err)
	require.Equal(t, int64(8), n, "a delete marker is a version kept")

	n, err = users.Count("a\x00")
	require.NoError(t, err)
	require.Equal(t, int64(3), n, "a neighbouring id is counted apart")
	_, err = users.Count("")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// LatestMany answers in the order asked, duplicates included, with the
// zero Doc for a miss or a deleted document.
func testLatestMany(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "b", 3)
	putN(t, users, db, "a", 1)
	putN(t, users, db, "c", 2)
	putN(t, users, db, "gone", 2)
	require.NoError(t, users.Delete(db, "gone"))

	docs, err := users.LatestMany("c", "missing", "a", "gone", "b", "c")
	require.NoError(t, err)
	require.Equal(t, []int64{2, 0, 1, 0, 3, 2}, versionsOf(docs))
	require.Equal(t, []string{"c", "", "a", "", "b", "c"}, idsOf(docs))
	require.Equal(t, []int64{1}, versionsOf(drain(t, users.History("c", tipkv.Query{Limit: 1, After: docs[0].Cursor()}))),
		"a result's cursor continues into the older versions")

	docs, err = users.LatestMany()
	require.NoError(t, err)
	require.Empty(t, docs)
	_, err = users.LatestMany("a", "")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = users.LatestMany("a", strings.Repeat("x", versioned.MaxIDSize+1))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// HistoryPage tells whether a page has more: it reads one version more
// than the page.
func testHistoryPage(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 7)
	var got [][]int64
	q := tipkv.Query{Limit: 3}
	for {
		page, next, err := users.HistoryPage("a", q)
		require.NoError(t, err)
		got = append(got, versionsOf(page))
		if next == "" {
			break
		}
		q.After = next
	}
	require.Equal(t, [][]int64{run(7, 5), run(4, 2), {1}}, got)

	// A last page that is exactly full has no next.
	page, next, err := users.HistoryPage("a", tipkv.Query{Limit: 7})
	require.NoError(t, err)
	require.Len(t, page, 7)
	require.Empty(t, next)
	page, next, err = users.HistoryPage("a", tipkv.Query{})
	require.NoError(t, err)
	require.Len(t, page, 7, "no limit: everything")
	require.Empty(t, next)
	page, next, err = users.HistoryPage("nobody", tipkv.Query{Limit: 2})
	require.NoError(t, err)
	require.Empty(t, page)
	require.Empty(t, next)
	_, _, err = users.HistoryPage("a", tipkv.Query{Limit: -1})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	page, next, err = users.HistoryPage("a", tipkv.Query{Limit: int(^uint(0) >> 1)})
	require.NoError(t, err)
	require.Len(t, page, 7)
	require.Empty(t, next)
}

// Collections and Streams name every collection and stream that holds
// keys, in bytewise order; names are bytes like ids.
func testCollectionsAndStreams(t *testing.T, b backend) {
	db := b.Open(t, nil)
	require.Empty(t, drain(t, versioned.Collections(db)))
	require.Empty(t, drain(t, versioned.Streams(db)))

	names := []string{"users", "user", "users\x00", "\xff", "a\x00b", "orders"}
	for i, name := range names {
		c, err := versioned.NewCollection[int](db, name, nil)
		require.NoError(t, err)
		for d := range 1 + i*3 {
			_, err := c.Put(db, fmt.Sprint("doc", d), d)
			require.NoError(t, err)
		}
	}
	feed, err := versioned.NewFeed[int](db, nil)
	require.NoError(t, err)
	for _, s := range []string{"clicks", "audit", "audit\x00x"} {
		for i := range 5 {
			_, err := feed.Append(db, s, i)
			require.NoError(t, err)
		}
	}
	// A collection emptied by Purge is gone; one whose documents are
	// deleted is not (its markers are versions).
	empty, err := versioned.NewCollection[int](db, "purged", nil)
	require.NoError(t, err)
	_, err = empty.Put(db, "x", 1)
	require.NoError(t, err)
	_, err = empty.Purge(db, "x")
	require.NoError(t, err)
	deleted, err := versioned.NewCollection[int](db, "deleted", nil)
	require.NoError(t, err)
	_, err = deleted.Put(db, "x", 1)
	require.NoError(t, err)
	require.NoError(t, deleted.Delete(db, "x"))

	want := append([]string{"deleted"}, names...)
	slices.Sort(want)
	require.Equal(t, want, drain(t, versioned.Collections(db)))
	require.Equal(t, []string{"audit", "audit\x00x", "clicks"}, drain(t, versioned.Streams(db)))

	// A consumer that stops early.
	for name, err := range versioned.Collections(db) {
		require.NoError(t, err)
		require.Equal(t, want[0], name)
		break
	}
	require.ErrorIs(t, drainErr(t, versioned.Collections(nil)), tipkv.ErrInvalid)
}

// Reads through one snapshot agree with each other while writes commit:
// each sees the store as of the snapshot, and a view of a finished
// snapshot, of another DB or of none is refused.
func testSnapshotReadsAgree(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 5)
	putN(t, users, db, "b", 2)
	feed, err := versioned.NewFeed[person](db, nil)
	require.NoError(t, err)
	for range 3 {
		_, err := feed.Append(db, "s", person{})
		require.NoError(t, err)
	}

	var kept *tipkv.Snapshot
	require.NoError(t, db.View(func(s *tipkv.Snapshot) error {
		kept = s
		view, fv := users.In(s), feed.In(s)
		check := func(when string) {
			d, err := view.Latest("a")
			require.NoError(t, err, when)
			require.Equal(t, int64(5), d.Version, when)
			d, err = view.Get("a", 5)
			require.NoError(t, err, when)
			require.Equal(t, 4, d.Value.Age, when)
			d, err = view.AsOf("a", 100)
			require.NoError(t, err, when)
			require.Equal(t, int64(5), d.Version, when)
			_, err = view.Get("a", 6)
			require.ErrorIs(t, err, tipkv.ErrNotFound, when)
			require.Equal(t, run(5, 1), versionsOf(drain(t, view.History("a", tipkv.Query{}))), when)
			page, next, err := view.HistoryPage("a", tipkv.Query{Limit: 2})
			require.NoError(t, err, when)
			require.Equal(t, run(5, 4), versionsOf(page), when)
			require.NotEmpty(t, next, when)
			require.Equal(t, []string{"a", "b"}, idsOf(drain(t, view.LatestAll(tipkv.Query{}))), when)
			n, err := view.Count("a")
			require.NoError(t, err, when)
			require.Equal(t, int64(5), n, when)
			many, err := view.LatestMany("b", "c", "a")
			require.NoError(t, err, when)
			require.Equal(t, []int64{2, 0, 5}, versionsOf(many), when)
			require.Len(t, drain(t, fv.Newest("s", tipkv.Query{})), 3, when)
			require.Len(t, drain(t, fv.Between("s", time.Time{}, versioned.MaxTime, tipkv.Query{})), 3, when)
		}
		check("before the writes")
		putN(t, users, db, "a", 2)
		_, err := users.Put(db, "c", person{})
		require.NoError(t, err)
		require.NoError(t, users.Delete(db, "b"))
		_, err = users.Prune(db, "a", 2)
		require.NoError(t, err)
		_, err = feed.Append(db, "s", person{})
		require.NoError(t, err)
		require.NoError(t, feed.Trim(db, "s", 1))
		check("after the writes")

		d, err := users.Latest("a")
		require.NoError(t, err)
		require.Equal(t, int64(7), d.Version, "the DB itself sees the writes")

		other := b.Open(t, nil)
		otherUsers := people(t, other)
		_, err = otherUsers.In(s).Latest("a")
		require.ErrorIs(t, err, tipkv.ErrInvalid, "a snapshot of another DB")
		return nil
	}))
	_, err = users.In(kept).Latest("a")
	require.ErrorIs(t, err, tipkv.ErrInvalid, "a snapshot whose View returned")
	require.ErrorIs(t, drainErr(t, users.In(kept).History("a", tipkv.Query{})), tipkv.ErrInvalid)
	require.ErrorIs(t, drainErr(t, feed.In(kept).Newest("s", tipkv.Query{})), tipkv.ErrInvalid)
	_, err = users.In(nil).Count("a")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// checked runs a test with a backend that remembers the DBs it hands out,
// and ends it as every conformance test ends: each store the test left
// open checked healthy (Healthy).
func checked(f func(*testing.T, backend)) func(*testing.T, backend) {
	return func(t *testing.T, b backend) {
		var mu sync.Mutex
		var dbs []*tipkv.DB
		keep := func(db *tipkv.DB) *tipkv.DB {
			mu.Lock()
			defer mu.Unlock()
			dbs = append(dbs, db)
			return db
		}
		rb := b
		rb.Open = func(t testing.TB, opts *tipkv.Options) *tipkv.DB { return keep(b.Open(t, opts)) }
		if b.Reopen != nil {
			rb.Reopen = func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB { return keep(b.Reopen(t, db, opts)) }
		}
		if b.Second != nil {
			rb.Second = func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB { return keep(b.Second(t, db, opts)) }
		}
		f(t, rb)
		if t.Failed() {
			return
		}
		for _, db := range dbs {
			if s, err := link.StoreOf(db); err == nil {
				if _, err := s.Get(metaFormatKey); errors.Is(err, engine.ErrClosed) {
					continue // closed by the test
				}
			}
			Healthy(t, db)
		}
	}
}

// spawn runs f in a goroutine counted by wg.
func spawn(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		f()
	}()
}
