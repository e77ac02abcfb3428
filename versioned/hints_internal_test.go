package versioned

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
)

// Between the moment a Tx's batch is applied and the moment the Tx
// releases its documents, the version cache's entry still holds the old
// latest version: Latest must not answer from it (see hints), but read the
// store, which already shows the new one. A hook registered before the
// Put runs in that window.
func TestLatestBetweenApplyAndRelease(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	c, err := NewCollection(db, "docs", &Options[string]{Codec: codec.String{}})
	require.NoError(t, err)
	for range 3 {
		_, err := c.Put(db, "a", "old")
		require.NoError(t, err)
	}
	d, err := c.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(3), d.Version)
	_, _, found, ok := c.w.cache.hints.lookup(c.docPrefix(nil, "a"))
	require.True(t, found && ok, "version 3 is published")

	var inWindow Doc[string]
	var windowErr error
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		if err := link.Write(b, func(tx *storage.Tx) error {
			tx.OnApplied(func() { inWindow, windowErr = c.Latest("a") })
			return nil
		}); err != nil {
			return err
		}
		_, err := c.Put(b, "a", "new")
		return err
	}))
	require.NoError(t, windowErr)
	require.Equal(t, int64(4), inWindow.Version, "Latest after the batch applied")
	require.Equal(t, "new", inWindow.Value)
	d, err = c.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(4), d.Version)
}
