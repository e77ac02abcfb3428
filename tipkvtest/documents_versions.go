package tipkvtest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// documentVersionCases returns the tests of writing versions: Put, PutIf,
// AsOf, ids as bytes, values that do not decode, atomic Updates, and
// versions after a reopen.
func documentVersionCases() []testCase {
	return []testCase{
		{"PutWritesNextVersion", checked(testPutWritesNextVersion)},
		{"PutIf", checked(testPutIf)},
		{"AsOf", checked(testAsOf)},
		{"IDsAreBytes", checked(testIDsAreBytes)},
		{"ValueThatDoesNotDecodeIsCorrupt", checked(testValueThatDoesNotDecodeIsCorrupt)},
		{"UpdateWritesManyDocumentsAtomically", checked(testUpdateWritesManyDocumentsAtomically)},
		{"UpdatePanicGivesVersionsBack", checked(testUpdatePanicGivesVersionsBack)},
		{"VersionsContinueAfterReopen", checked(testVersionsContinueAfterReopen)},
	}
}

// Put writes versions 1, 2, 3, ... of a document, and Latest and Get read
// them back; a version never written is ErrNotFound, version 0 is
// ErrInvalid, and a miss names the id.
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

// PutIf(expected) writes only when the document's latest version is
// expected (0: no document); otherwise it fails with ErrConflict naming
// both versions, and writes nothing. A negative expected is ErrInvalid.
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
	require.Empty(t, testutil.Collect(t, users.History("new", tipkv.Query{})))
}

// AsOf(v) is the greatest version <= v: past the latest it is the latest,
// below the oldest kept (after a prune) ErrNotFound, and v < 1 is
// ErrInvalid. A neighbouring id's keys ("a\x00") never answer for "a".
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
		require.Len(t, testutil.Collect(t, users.History(id, tipkv.Query{})), i+1, "%q", id)
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	require.Equal(t, want, idsOf(testutil.Collect(t, users.LatestAll(tipkv.Query{}))), "LatestAll is in bytewise id order")
}

// A stored value that does not decode is ErrCorrupt naming the
// collection, id and version, from Latest and as History's last pair; the
// other versions still read.
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

// An Update writes several documents all or nothing: its Puts see each
// other's versions, reads outside it see committed writes only, a failed
// Update writes nothing and gives its versions back, and a PutIf inside it
// counts the Update's own earlier Puts.
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

// An Update whose function panics releases the documents it held and
// gives their versions back: the next Put writes version 1.
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

// After a reopen versions continue where they were, and a delete marker
// is read back: a PutIf of the version before it conflicts, PutIf(0)
// writes after it.
func testVersionsContinueAfterReopen(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 3)
	v, err := users.Delete(db, "b")
	require.NoError(t, err)
	require.Zero(t, v, "b has no version yet")
	putN(t, users, db, "b", 2)
	v, err = users.Delete(db, "b")
	require.NoError(t, err)
	require.Equal(t, int64(3), v)

	db = b.Reopen(t, db, nil)
	users = people(t, db)
	v, err = users.Put(db, "a", person{})
	require.NoError(t, err)
	require.Equal(t, int64(4), v)
	_, err = users.PutIf(db, "b", person{}, 2)
	require.ErrorIs(t, err, tipkv.ErrConflict, "the marker is read back")
	v, err = users.PutIf(db, "b", person{}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(4), v)
}

func versionKey(coll, id string, v int64) []byte {
	return codec.AppendDesc(codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), coll), id), v)
}
