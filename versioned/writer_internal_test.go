package versioned

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
)

// The detection of a write nested in an Update relies on the name of the
// root package's frame (updateFn) and on Tx.Running: if either changes,
// this fails at once rather than a nested write hanging.
func TestUpdateFrameIsFound(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	defer db.Close()
	require.False(t, insideEnclosingUpdate(), "outside any Update")
	var outer *storage.Tx
	require.NoError(t, link.Write(db, func(tx *storage.Tx) error {
		outer = tx
		require.True(t, tx.Running())
		require.False(t, insideEnclosingUpdate(), "in one Update: its own frame only")
		return db.Update(func(*tipkv.Batch) error {
			require.True(t, insideEnclosingUpdate(), "in an Update inside another")
			return nil
		})
	}))
	require.False(t, outer.Running(), "the function has returned")
}
