package link_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// A panic before the batch is applied runs the abort hooks (so that a
// lock a prepare hook took is released), then goes on up; nothing is
// written.
func TestCommitPanicRunsAbortHooks(t *testing.T) {
	s, err := pebblestore.Open("db", pebblestore.Config{InMemory: true, CacheSize: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	var tx link.Tx
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
	require.ErrorIs(t, err, engine.ErrNotFound)
}

// State keeps one value per key, created once, past the keys it looks up
// in a list (it moves to a map beyond them); a recycled Tx starts with no
// state and no hooks.
func TestStateAndRecycling(t *testing.T) {
	s, err := pebblestore.Open("db", pebblestore.Config{InMemory: true, CacheSize: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	type key struct{ i int }
	ran := 0
	for n := range 3 {
		owner := &link.DB{}
		tx := link.NewTx(s.NewBatch(), owner)
		require.Same(t, owner, tx.DB)
		inits := 0
		for round := range 2 {
			for i := range 20 {
				v := tx.State(key{i}, func() any { inits++; return i * 10 })
				require.Equal(t, i*10, v, "round %d key %d", round, i)
			}
		}
		require.Equal(t, 20, inits, "each key's value is created once")
		require.NoError(t, tx.Commit(false))
		require.Equal(t, n, ran, "no hook of an earlier Tx runs")
		tx.OnCommit(func() { ran++ })
		tx.OnAbort(func() { ran++ })
		tx.Abort()
		require.Equal(t, n+1, ran)
		require.NoError(t, tx.Batch.Close())
		tx.Release()
	}
}
