package versioned_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
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

// A time index entry is a hint the read checks against the versions: with
// any entry in the index (any time, any value), AsOfTime answers what the
// versions say, or ErrCorrupt for a value that is no version number,
// never a wrong version or a panic. The seed corpus is in
// testdata/fuzz/FuzzTimeIndexEntry.
func FuzzTimeIndexEntry(f *testing.F) {
	f.Add(int64(2_500_000_000), []byte{0x80, 0, 0, 0, 0, 0, 0, 4}) // names a later version
	f.Add(int64(4_000_000_000), []byte{0x80, 0, 0, 0, 0, 0, 0, 2}) // an earlier one
	f.Add(int64(1), []byte{0x80, 0, 0, 0, 0, 0, 0, 9})             // one never written
	f.Add(int64(3_000_000_000), []byte{1, 2, 3})                   // no version number
	clock := testutil.NewClock(t0)
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, Clock: clock.Now})
	require.NoError(f, err)
	defer db.Close()
	c, err := versioned.NewCollection[user](db, "users", nil)
	require.NoError(f, err)
	require.NoError(f, c.EnableTimeIndex(context.Background()))
	for range 5 {
		clock.Advance(time.Second)
		_, err := c.Put(db, "doc", user{})
		require.NoError(f, err)
	}
	s, err := link.StoreOf(db)
	require.NoError(f, err)
	prefix := codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyTimeIndex), "users"), "doc")
	f.Fuzz(func(t *testing.T, at int64, value []byte) {
		key := codec.AppendDesc(bytes.Clone(prefix), t0.UnixNano()+at)
		if at < 0 {
			key = codec.AppendDesc(bytes.Clone(prefix), at)
		}
		old, oldErr := s.Get(key)
		b := s.NewBatch()
		require.NoError(t, b.Set(key, value))
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
		defer func() { // put the index back as it was
			b := s.NewBatch()
			if oldErr == nil {
				require.NoError(t, b.Set(key, old))
			} else {
				require.NoError(t, b.Delete(key))
			}
			require.NoError(t, b.Apply(false))
			require.NoError(t, b.Close())
		}()
		for half := 1; half <= 11; half += 2 { // t0 + 0.5 s ... t0 + 5.5 s
			want := int64(half / 2) // version v is at t0 + v s
			d, err := c.AsOfTime("doc", t0.Add(time.Duration(half)*time.Second/2))
			switch {
			case errors.Is(err, tipkv.ErrCorrupt):
			case want == 0:
				require.ErrorIs(t, err, tipkv.ErrNotFound)
			default:
				require.NoError(t, err)
				require.Equal(t, want, d.Version)
			}
		}
	})
}
