package versioned_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// collectGroups reads Groups to the end, failing the test on an error.
func collectGroups(t *testing.T, f *versioned.Feed[click], stream string) []versioned.Group {
	t.Helper()
	var out []versioned.Group
	for g, err := range f.Groups(stream) {
		require.NoError(t, err)
		out = append(out, g)
	}
	return out
}

// Groups lists exactly the groups of one stream that have a cursor, in
// name order, with the cursors Advance stored: not those of a stream
// whose name extends it, not a dropped one, and nothing for a stream
// without groups. The same on a shared engine.
func TestFeedGroups(t *testing.T) {
	for name, db := range map[string]*tipkv.DB{"pebble": testutil.OpenMem(t), "shared": openShared(t)} {
		t.Run(name, func(t *testing.T) {
			f, err := versioned.NewFeed[click](db, nil)
			require.NoError(t, err)
			var ps []int64
			for range 4 {
				p, err := f.Append(db, "s", click{Page: "/"})
				require.NoError(t, err)
				ps = append(ps, p)
			}
			_, err = f.Append(db, "s2", click{Page: "/"})
			require.NoError(t, err)

			require.Empty(t, collectGroups(t, f, "s"))
			require.NoError(t, f.Advance(db, "s", "billing", 0, ps[1]))
			require.NoError(t, f.Advance(db, "s", "audit", 0, ps[3]))
			require.NoError(t, f.Advance(db, "s", "gone", 0, ps[0]))
			require.NoError(t, f.Advance(db, "s", "a\x00b", 0, ps[2])) // any bytes
			require.NoError(t, f.Advance(db, "s2", "other", 0, ps[0]))
			require.NoError(t, f.Advance(db, "s\x00", "x", 0, ps[0])) // a name that extends "s"
			require.NoError(t, f.DropGroup(db, "s", "gone"))

			require.Equal(t, []versioned.Group{
				{Stream: "s", Name: "a\x00b", Position: ps[2]},
				{Stream: "s", Name: "audit", Position: ps[3]},
				{Stream: "s", Name: "billing", Position: ps[1]},
			}, collectGroups(t, f, "s"))
			require.Equal(t, []versioned.Group{{Stream: "s2", Name: "other", Position: ps[0]}}, collectGroups(t, f, "s2"))
			require.Empty(t, collectGroups(t, f, "none"))

			// The consumer may stop early.
			n := 0
			for _, err := range f.Groups("s") {
				require.NoError(t, err)
				n++
				break
			}
			require.Equal(t, 1, n)
		})
	}
}

// A bad stream name is ErrInvalid, yielded once.
func TestFeedGroupsInvalid(t *testing.T) {
	db := testutil.OpenMem(t)
	f, err := versioned.NewFeed[click](db, nil)
	require.NoError(t, err)
	for _, stream := range []string{"", string(make([]byte, versioned.MaxNameSize+1))} {
		n := 0
		for g, err := range f.Groups(stream) {
			require.ErrorIs(t, err, tipkv.ErrInvalid)
			require.Zero(t, g)
			n++
		}
		require.Equal(t, 1, n)
	}
}

// After the DB closes, Groups yields ErrClosed.
func TestFeedGroupsClosed(t *testing.T) {
	db := testutil.OpenMem(t)
	f, err := versioned.NewFeed[click](db, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	n := 0
	for _, err := range f.Groups("s") {
		require.ErrorIs(t, err, tipkv.ErrClosed)
		n++
	}
	require.Equal(t, 1, n)
}
