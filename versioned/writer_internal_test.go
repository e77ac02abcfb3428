package versioned

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
)

// The detection of a write nested in an Update relies on the name of the
// root package's frame (updateFn) and on Tx.Running: if either changes,
// this fails at once rather than a nested write hanging.
func TestUpdateFrameIsFound(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	defer db.Close()
	require.False(t, insideEnclosingUpdate(false), "a write on the DB outside any Update")
	var outer *link.Tx
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		return link.Write(b, func(tx *link.Tx) error {
			outer = tx
			require.True(t, tx.Running(), "the Update's function is running")
			require.False(t, insideEnclosingUpdate(true), "in one Update: its own frame only")
			require.True(t, insideEnclosingUpdate(false), "a write on the DB inside an Update")
			return link.Write(db, func(inner *link.Tx) error {
				require.False(t, inner.Running(), "a write on the DB runs no caller's code")
				return db.Update(func(*tipkv.Batch) error {
					require.True(t, insideEnclosingUpdate(true), "an Update inside another")
					return nil
				})
			})
		})
	}))
	require.False(t, outer.Running(), "the function has returned")
}
