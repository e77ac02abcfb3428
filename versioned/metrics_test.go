package versioned_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// DB.Metrics counts the versions each collection wrote and removed in this
// process, over every handle on it; an Update that fails counts nothing.
func TestCollectionMetrics(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	defer db.Close()
	pages, err := versioned.NewCollection[string](db, "pages", nil)
	require.NoError(t, err)
	again, err := versioned.NewCollection[string](db, "pages", nil)
	require.NoError(t, err)
	kept, err := versioned.NewCollection[string](db, "kept", &versioned.Options[string]{KeepVersions: 2})
	require.NoError(t, err)

	for _, s := range []string{"a", "b", "c"} {
		_, err := pages.Put(db, "home", s)
		require.NoError(t, err)
	}
	_, err = again.Put(db, "about", "x")
	require.NoError(t, err)
	require.NoError(t, pages.Delete(db, "home"))    // a marker is a version written
	require.NoError(t, pages.Delete(db, "missing")) // writes nothing
	n, err := pages.Prune(db, "home", 2)            // drops 1 and 2
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	boom := errors.New("boom")
	require.ErrorIs(t, db.Update(func(b *tipkv.Batch) error {
		if _, err := pages.Put(b, "home", "lost"); err != nil {
			return err
		}
		return boom
	}), boom)
	for i := range 5 {
		_, err := kept.Put(db, "k", string(rune('a'+i)))
		require.NoError(t, err)
	}

	m, err := db.Metrics()
	require.NoError(t, err)
	require.Equal(t, []tipkv.CollectionMetrics{
		{Name: "kept", Writes: 5, Removed: 3},
		{Name: "pages", Writes: 5, Removed: 2},
	}, m.Collections)
}
