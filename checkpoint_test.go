package tipkv_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/testutil"
)

// A checkpoint is an ordinary store: it opens, holds what was written
// before it was taken and not what came after, and its marker says it is
// complete.
func TestCheckpointOpensAsAStore(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		db, _ := testutil.OpenDir(t, &tipkv.Options{NoSync: noSync})
		require.NoError(t, put(db, "\x01before", "1"))
		dest := filepath.Join(t.TempDir(), "nested", "copy")
		require.NoError(t, db.Checkpoint(dest))
		require.NoError(t, put(db, "\x01after", "2"))

		marker, err := os.ReadFile(filepath.Join(dest, pebblestore.MarkerFile))
		require.NoError(t, err)
		format, creating, err := pebblestore.ParseMarker(marker)
		require.NoError(t, err)
		require.Equal(t, tipkv.FormatVersion, format)
		require.False(t, creating)

		cp, err := tipkv.Open(dest, &tipkv.Options{ReadOnly: true})
		require.NoError(t, err)
		v, err := get(t, cp, "\x01before")
		require.NoError(t, err, "noSync=%v", noSync)
		require.Equal(t, "1", v)
		_, err = get(t, cp, "\x01after")
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		require.NoError(t, cp.Close())

		// The copy is writable too: restoring is opening it.
		cp, err = tipkv.Open(dest, nil)
		require.NoError(t, err)
		require.NoError(t, put(cp, "\x01restored", "3"))
		require.NoError(t, cp.Close())
	}
}

// A DB opened read-only is checkpointed by copying its files: nothing
// writes it while this process holds its lock.
func TestCheckpointReadOnly(t *testing.T) {
	db, dir := testutil.OpenDir(t, nil)
	require.NoError(t, put(db, "\x01flushed", "1"))
	require.NoError(t, db.Flush())
	require.NoError(t, put(db, "\x01in-the-log", "2"))
	require.NoError(t, db.Close())

	ro, err := tipkv.Open(dir, &tipkv.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	dest := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, ro.Checkpoint(dest))
	cp, err := tipkv.Open(dest, &tipkv.Options{ReadOnly: true})
	require.NoError(t, err)
	defer cp.Close()
	for k, want := range map[string]string{"\x01flushed": "1", "\x01in-the-log": "2"} {
		v, err := get(t, cp, k)
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
}

func TestCheckpointRefuses(t *testing.T) {
	db, dir := testutil.OpenDir(t, nil)

	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o644))
	err := db.Checkpoint(full)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorContains(t, err, "not empty")
	_, err = os.Stat(filepath.Join(full, "x"))
	require.NoError(t, err, "a refused checkpoint leaves dir as it was")

	err = db.Checkpoint(filepath.Join(dir, "backup"))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorContains(t, err, "inside the store")
	require.ErrorIs(t, db.Checkpoint(dir), tipkv.ErrInvalid)
	require.ErrorIs(t, db.Checkpoint(""), tipkv.ErrInvalid)

	empty := t.TempDir() // an empty directory is fine
	require.NoError(t, db.Checkpoint(empty))

	mem := testutil.OpenMem(t)
	err = mem.Checkpoint(t.TempDir())
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorContains(t, err, "in memory")

	require.NoError(t, db.Close())
	dest := filepath.Join(t.TempDir(), "closed")
	require.ErrorIs(t, db.Checkpoint(dest), tipkv.ErrClosed)
	_, err = os.Stat(dest)
	require.True(t, os.IsNotExist(err))
}
