package tipkv_test

import (
	"iter"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

func TestUpdateNilIsInvalid(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	defer db.Close()
	require.ErrorIs(t, db.Update(nil), tipkv.ErrInvalid)
}

// A store whose write-ahead log was deleted before anything was flushed
// would open empty; its marker says it was created, so Open refuses it
// with ErrCorrupt instead.
func TestLostWriteAheadLog(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	docs, err := versioned.NewCollection[string](db, "c", nil)
	require.NoError(t, err)
	_, err = docs.Put(db, "a", "x")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	for _, l := range logs {
		require.NoError(t, os.Remove(l))
	}
	_, err = tipkv.Open(dir, nil)
	require.ErrorIs(t, err, tipkv.ErrCorrupt)
	require.Contains(t, err.Error(), "lost its data")
}

// Close inside an iteration, and Close with an iterator abandoned by an
// iter.Pull2 that was never stopped, return at once; the iteration ends
// with ErrClosed at its next step; the store reopens.
func TestCloseWithIterationsOpen(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	docs, err := versioned.NewCollection[int](db, "c", nil)
	require.NoError(t, err)
	for i := range 5 {
		_, err := docs.Put(db, "a", i)
		require.NoError(t, err)
	}
	next, stop := iter.Pull2(docs.History("a", tipkv.Query{}))
	_, err, ok := next() // the iteration now waits inside its loop, its iterator open
	require.True(t, ok)
	require.NoError(t, err)

	var errs []error
	n := 0
	for _, err := range docs.History("a", tipkv.Query{}) {
		if err != nil {
			errs = append(errs, err)
			break
		}
		n++
		if n == 2 {
			require.NoError(t, db.Close(), "Close inside the loop returns")
		}
	}
	require.Equal(t, 2, n)
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], tipkv.ErrClosed)
	// The abandoned iteration still holds Pebble, so the directory stays
	// locked; stopping it closes Pebble, and the store reopens.
	_, err = tipkv.Open(dir, nil)
	require.ErrorIs(t, err, tipkv.ErrLocked)
	stop()
	db, err = tipkv.Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
}
