package tipkvtest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// documentRepairCases returns the tests of the repairs: Revert, Undelete
// and DeleteIf, each a new version with its provenance.
func documentRepairCases() []testCase {
	return []testCase{
		{"Revert", checked(testRevert)},
		{"Undelete", checked(testUndelete)},
		{"DeleteIf", checked(testDeleteIf)},
	}
}

// Revert writes an old version's value as the next version, with the
// caller's metadata, the version it restored and a default reason; a
// missing or deleted version is ErrNotFound and writes nothing.
func testRevert(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	for _, n := range []string{"good", "bad", "worse"} {
		_, err := users.Put(db, "p", person{Name: n})
		require.NoError(t, err)
	}
	v, err := users.Revert(db, "p", 1, tipkv.Metadata{Author: "ada"})
	require.NoError(t, err)
	require.Equal(t, int64(4), v)
	d, err := users.Latest("p")
	require.NoError(t, err)
	require.Equal(t, "good", d.Value.Name)
	m, err := d.Metadata()
	require.NoError(t, err)
	require.Equal(t, tipkv.Metadata{Author: "ada", Reason: "revert to version 1", Headers: map[string]string{versioned.RevertHeader: "1"}}, m)

	v, err = users.Delete(db, "p")
	require.NoError(t, err)
	require.Equal(t, int64(5), v)
	_, err = users.Revert(db, "p", 5, tipkv.Metadata{})
	require.ErrorIs(t, err, tipkv.ErrNotFound, "a delete marker has no value to restore")
	_, err = users.Revert(db, "p", 9, tipkv.Metadata{})
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	n, err := users.Count("p")
	require.NoError(t, err)
	require.Equal(t, int64(5), n, "nothing written")
	v, err = users.Revert(db, "p", 2, tipkv.Metadata{Reason: "mine"})
	require.NoError(t, err, "reverting a deleted document brings it back")
	d, err = users.Latest("p")
	require.NoError(t, err)
	require.Equal(t, v, d.Version)
	require.Equal(t, "bad", d.Value.Name)
	m, err = d.Metadata()
	require.NoError(t, err)
	require.Equal(t, "mine", m.Reason)
}

// Undelete writes the version before the latest delete marker again; it
// fails with ErrConflict when the latest version is no marker.
func testUndelete(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	_, err := users.Undelete(db, "p", tipkv.Metadata{})
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	_, err = users.Put(db, "p", person{Name: "kept"})
	require.NoError(t, err)
	_, err = users.Undelete(db, "p", tipkv.Metadata{})
	require.ErrorIs(t, err, tipkv.ErrConflict, "not deleted")
	_, err = users.Delete(db, "p")
	require.NoError(t, err)
	v, err := users.Undelete(db, "p", tipkv.Metadata{Author: "bob"})
	require.NoError(t, err)
	require.Equal(t, int64(3), v)
	d, err := users.Latest("p")
	require.NoError(t, err)
	require.Equal(t, "kept", d.Value.Name)
	m, err := d.Metadata()
	require.NoError(t, err)
	require.Equal(t, tipkv.Metadata{Author: "bob", Reason: "undelete", Headers: map[string]string{versioned.RevertHeader: "1"}}, m)
}

// DeleteIf deletes only when the latest version is the one expected, and
// returns the marker's version.
func testDeleteIf(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	_, err := users.DeleteIf(db, "p", 1)
	require.ErrorIs(t, err, tipkv.ErrConflict, "no version")
	putN(t, users, db, "p", 2)
	_, err = users.DeleteIf(db, "p", 1)
	require.ErrorIs(t, err, tipkv.ErrConflict, "stale")
	_, err = users.DeleteIf(db, "p", 0)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	v, err := users.DeleteIf(tipkv.WithMetadata(db, tipkv.Metadata{Reason: "spam"}), "p", 2)
	require.NoError(t, err)
	require.Equal(t, int64(3), v)
	v, err = users.DeleteIf(db, "p", 3)
	require.NoError(t, err, "already deleted at the expected version")
	require.Equal(t, int64(3), v)
	hist := testutil.Collect(t, users.History("p", tipkv.Query{}))
	require.Equal(t, []int64{3, 2, 1}, versionsOf(hist))
	require.True(t, hist[0].Deleted)
	m, err := hist[0].Metadata()
	require.NoError(t, err)
	require.Equal(t, "spam", m.Reason)
	if b.Second != nil {
		dbB := b.Second(t, db, nil)
		other := people(t, dbB)
		_, err := other.Put(dbB, "p", person{Name: "B"}) // 4, unseen by db
		require.NoError(t, err)
		_, err = users.DeleteIf(db, "p", 3)
		require.ErrorIs(t, err, tipkv.ErrConflict, "the store's latest is 4")
		require.ErrorContains(t, err, "latest version is 4")
		v, err = users.DeleteIf(db, "p", 4)
		require.NoError(t, err)
		require.Equal(t, int64(5), v)
	}
}
