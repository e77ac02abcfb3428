package storage_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/storage"
	"github.com/tipkv/tipkv/internal/storage/pebblestore"
)

// A panic before the batch is applied runs the abort hooks (so that a
// lock a prepare hook took is released), then goes on up; nothing is
// written.
func TestCommitPanicRunsAbortHooks(t *testing.T) {
	s, err := pebblestore.Open("db", pebblestore.Config{InMemory: true, CacheSize: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	var tx storage.Tx
	tx.Batch = s.NewBatch()
	defer tx.Batch.Close()
	require.NoError(t, tx.Batch.Set([]byte("\x02k"), []byte("v")))
	aborted, applied := 0, 0
	tx.OnAbort(func() { aborted++ })
	tx.OnApplied(func() { applied++ })
	tx.OnPrepare(func() error { panic("boom") })
	require.PanicsWithValue(t, "boom", func() { _ = tx.Commit(true) })
	require.Equal(t, 1, aborted)
	require.Zero(t, applied)
	_, err = s.Get([]byte("\x02k"))
	require.ErrorIs(t, err, storage.ErrNotFound)
}
