package tipkv_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
)

// A snapshot keeps its view while writes commit; it is refused after View
// returns; View passes fn's error through and refuses a nil fn.
func TestView(t *testing.T) {
	db := testutil.OpenMem(t)
	require.NoError(t, put(db, "\x06a", "old"))
	var kept *tipkv.Snapshot
	err := db.View(func(s *tipkv.Snapshot) error {
		kept = s
		require.NoError(t, put(db, "\x06a", "new"))
		owner, r, err := link.ReaderOf(s)
		require.NoError(t, err)
		ln, err := link.Of(db)
		require.NoError(t, err)
		require.Same(t, ln, owner)
		v, err := r.Get([]byte("\x06a"))
		require.NoError(t, err)
		require.Equal(t, "old", string(v), "the snapshot does not see a later commit")
		return errors.New("fn's error")
	})
	require.EqualError(t, err, "fn's error")
	_, _, err = link.ReaderOf(kept)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorIs(t, db.View(nil), tipkv.ErrInvalid)
	v, err := get(t, db, "\x06a")
	require.NoError(t, err)
	require.Equal(t, "new", v)
}
