package tipkv_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
	"github.com/tipkv/tipkv/internal/testutil"
)

// The Tx and the store's batch behind a Batch are recycled. A Batch kept
// past its Update stays refused while later Updates run on the recycled
// Tx, and what it tried to write lands in none of them.
func TestKeptBatchStaysOutOfLaterUpdates(t *testing.T) {
	db := testutil.OpenMem(t)
	var kept *tipkv.Batch
	require.NoError(t, db.Update(func(b *tipkv.Batch) error { kept = b; return put(b, "\x06a", "1") }))
	for i := range 20 {
		require.NoError(t, db.Update(func(b *tipkv.Batch) error {
			require.ErrorIs(t, put(kept, "\x06stale", "x"), tipkv.ErrInvalid)
			return put(b, "\x06b", itoa(i))
		}))
		require.ErrorIs(t, put(kept, "\x06stale", "x"), tipkv.ErrInvalid)
	}
	_, err := get(t, db, "\x06stale")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	v, err := get(t, db, "\x06b")
	require.NoError(t, err)
	require.Equal(t, "19", v)
}

// Hooks of an aborted or committed Update do not run again in a later one
// that reuses its Tx.
func TestRecycledTxKeepsNoHooks(t *testing.T) {
	db := testutil.OpenMem(t)
	var committed, aborted int
	hook := func(b *tipkv.Batch) error {
		return link.Write(b, func(tx *storage.Tx) error {
			tx.OnCommit(func() { committed++ })
			tx.OnAbort(func() { aborted++ })
			return tx.Batch.Set([]byte("\x06h"), []byte("v"))
		})
	}
	require.NoError(t, db.Update(hook))
	require.Error(t, db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, hook(b))
		return tipkv.ErrInvalid
	}))
	for range 10 {
		require.NoError(t, db.Update(func(b *tipkv.Batch) error { return put(b, "\x06x", "y") }))
		require.NoError(t, put(db, "\x06x", "z"))
	}
	require.Equal(t, 1, committed)
	require.Equal(t, 1, aborted)
}

// The write path's own allocations: one Update allocates its Batch and
// nothing else of tipkv's (the Tx and the store's batch are recycled); a
// write on the DB allocates nothing of its own.
func TestUpdateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	db := testutil.OpenMem(t)
	empty := func(*tipkv.Batch) error { return nil }
	require.NoError(t, db.Update(empty))
	n := testing.AllocsPerRun(200, func() { _ = db.Update(empty) })
	require.LessOrEqual(t, n, 1.0, "allocations per empty Update")
	noop := func(*storage.Tx) error { return nil }
	n = testing.AllocsPerRun(200, func() { _ = link.Write(db, noop) })
	require.LessOrEqual(t, n, 0.0, "allocations per write on the DB")
}
