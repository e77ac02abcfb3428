package versioned_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// Cursors come from clients: whatever the string, parsing fails with
// ErrInvalid or yields a usable position, never a panic. The seed corpus
// is in testdata/fuzz/FuzzCursor.
func FuzzCursor(f *testing.F) {
	f.Add("")
	f.Add("AWgAAAAAAAAAA1Gr2nw")
	f.Add("====")
	f.Fuzz(func(t *testing.T, s string) {
		c := tipkv.Cursor(s)
		if v, err := versioned.ParseHistoryCursor(c, "users", "a"); err != nil {
			requireInvalid(t, err)
		} else if v < 1 {
			t.Fatalf("history cursor %q parsed to version %d", s, v)
		}
		if id, err := versioned.ParseLatestAllCursor(c, "users"); err != nil {
			requireInvalid(t, err)
		} else if id == "" || len(id) > versioned.MaxIDSize {
			t.Fatalf("LatestAll cursor %q parsed to an id of %d bytes", s, len(id))
		}
		if p, err := versioned.ParseFeedCursor(c, "s"); err != nil {
			requireInvalid(t, err)
		} else if p < 1 {
			t.Fatalf("feed cursor %q parsed to position %d", s, p)
		}
	})
}

func requireInvalid(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, tipkv.ErrInvalid) {
		t.Fatalf("error %v does not match ErrInvalid", err)
	}
}

// Keys of the two families decode, or fail with ErrCorrupt; what decodes
// encodes back to the same bytes. The seed corpus is in
// testdata/fuzz/FuzzDecodeKey.
func FuzzDecodeKey(f *testing.F) {
	f.Add([]byte{})
	f.Add(versionKey("users", "a", 3))
	f.Add(feedKey("s", 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := versioned.DecodeKey(b)
		if err != nil {
			if !errors.Is(err, tipkv.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		var again []byte
		if k.Family == codec.FamilyVersions {
			again = versionKey(k.Name, k.ID, k.N)
		} else {
			again = feedKey(k.Name, k.N)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, k, again)
		}
	})
}

func versionKey(coll, id string, v int64) []byte {
	return codec.AppendDesc(codec.AppendString(codec.AppendString([]byte{byte(codec.FamilyVersions)}, coll), id), v)
}

func feedKey(stream string, p int64) []byte {
	return codec.AppendDesc(codec.AppendString([]byte{byte(codec.FamilyFeed)}, stream), p)
}

// The cursors reads hand out parse back to their position, for the read
// they came from only.
func TestCursorsRoundTrip(t *testing.T) {
	db, users := openUsers(t)
	id := "a\x00\xff"
	putN(t, users, db, id, 3)
	d, err := users.Get(id, 2)
	require.NoError(t, err)
	v, err := versioned.ParseHistoryCursor(d.Cursor(), "users", id)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	_, err = versioned.ParseHistoryCursor(d.Cursor(), "users", "a")
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	all := testutil.Collect(t, users.LatestAll(tipkv.Query{}))
	got, err := versioned.ParseLatestAllCursor(all[0].Cursor(), "users")
	require.NoError(t, err)
	require.Equal(t, id, got)
	_, err = versioned.ParseLatestAllCursor(all[0].Cursor(), "userz")
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	e := versioned.Event[click]{Stream: "s", Position: 42}
	p, err := versioned.ParseFeedCursor(e.Cursor(), "s")
	require.NoError(t, err)
	require.Equal(t, int64(42), p)
	_, err = versioned.ParseFeedCursor(e.Cursor(), "t")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

func TestDecodeKey(t *testing.T) {
	k, err := versioned.DecodeKey(versionKey("users", "a\x00b", 7))
	require.NoError(t, err)
	require.Equal(t, versioned.DecodedKey{Family: codec.FamilyVersions, Name: "users", ID: "a\x00b", N: 7}, k)
	k, err = versioned.DecodeKey(feedKey("s", 9))
	require.NoError(t, err)
	require.Equal(t, versioned.DecodedKey{Family: codec.FamilyFeed, Name: "s", N: 9}, k)
	for _, bad := range [][]byte{
		nil,
		{0x02, 'q', 0, 1},
		versionKey("users", "a", 7)[:10],
		append(versionKey("users", "a", 7), 0),
		versionKey("users", "a", 0),
		versionKey("users", "", 1),
		versionKey("", "a", 1),
		feedKey("s", 1)[:5],
	} {
		_, err := versioned.DecodeKey(bad)
		require.ErrorIs(t, err, tipkv.ErrCorrupt, "%x", bad)
	}
}
