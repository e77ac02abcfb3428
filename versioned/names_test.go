package versioned_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// Collections and Streams name every collection and stream that holds
// keys, in bytewise order, with one seek per name however many keys each
// holds; names are bytes like ids.
func TestCollectionsAndStreams(t *testing.T) {
	db := testutil.OpenMem(t)
	require.Empty(t, collect(t, versioned.Collections(db)))
	require.Empty(t, collect(t, versioned.Streams(db)))

	names := []string{"users", "user", "users\x00", "\xff", "a\x00b", "orders"}
	for i, name := range names {
		c, err := versioned.NewCollection[int](db, name, nil)
		require.NoError(t, err)
		for d := range 1 + i*20 {
			_, err := c.Put(db, fmt.Sprint("doc", d), d)
			require.NoError(t, err)
		}
	}
	feed, err := versioned.NewFeed[int](db, nil)
	require.NoError(t, err)
	for _, s := range []string{"clicks", "audit", "audit\x00x"} {
		for i := range 30 {
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
	require.NoError(t, db.Flush())

	var c seekCounter
	defer versioned.WrapIters(c.wrap)()
	want := append([]string{"deleted"}, names...)
	sortStrings(want)
	require.Equal(t, want, collect(t, versioned.Collections(db)))
	require.Equal(t, int64(len(want)+1), c.seeks.Load(), "First, then one seek per name")
	require.Zero(t, c.nexts.Load())
	require.Equal(t, []string{"audit", "audit\x00x", "clicks"}, collect(t, versioned.Streams(db)))

	// A consumer that stops early.
	for name, err := range versioned.Collections(db) {
		require.NoError(t, err)
		require.Equal(t, want[0], name)
		break
	}

	require.ErrorIs(t, readErr(versioned.Collections(nil)), tipkv.ErrInvalid)
	closed, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	require.ErrorIs(t, readErr(versioned.Streams(closed)), tipkv.ErrClosed)
}
