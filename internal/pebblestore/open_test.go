package pebblestore_test

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// A memtable Pebble would panic on is refused at Open.
func TestMemTableTooSmall(t *testing.T) {
	_, err := pebblestore.Open("db", pebblestore.Config{InMemory: true, MemTableSize: 4 << 10})
	require.ErrorIs(t, err, engine.ErrInvalid)
}

// A batch that would reach Pebble's limit (4 GiB, where Pebble panics) is
// refused with ErrInvalid at the write that would cross it, and Apply
// refuses the whole batch: nothing is written.
func TestBatchOverTheLimit(t *testing.T) {
	defer pebblestore.SetMaxBatchBytes(64 << 10)()
	s, err := pebblestore.Open("db", pebblestore.Config{InMemory: true, CacheSize: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	b := s.NewBatch()
	defer b.Close()
	val := make([]byte, 10<<10)
	var werr error
	for i := 0; i < 10 && werr == nil; i++ {
		werr = b.Set(key(i+1), val)
	}
	require.ErrorIs(t, werr, engine.ErrInvalid)
	require.ErrorIs(t, b.Apply(true), engine.ErrInvalid)
	_, err = s.Get(key(1))
	require.ErrorIs(t, err, engine.ErrNotFound)
}

// readOnlyFS answers EROFS to anything that would write, as a read-only
// mount does.
type readOnlyFS struct{ vfs.FS }

func (fs readOnlyFS) Lock(string) (io.Closer, error) {
	return nil, &os.PathError{Op: "open", Err: syscall.EROFS}
}
func (fs readOnlyFS) Create(string, vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, &os.PathError{Op: "open", Err: syscall.EROFS}
}

// A store on a read-only file system opens with ReadOnly (Pebble takes its
// lock by creating LOCK, which such a file system refuses), and reads.
func TestReadOnlyFileSystem(t *testing.T) {
	dir := t.TempDir()
	writeTables(t, dir)
	_, err := pebblestore.Open(dir, pebblestore.Config{FS: readOnlyFS{vfs.Default}, CacheSize: 1 << 20})
	require.Error(t, err, "a writable open needs the lock")
	s, err := pebblestore.Open(dir, pebblestore.Config{FS: readOnlyFS{vfs.Default}, CacheSize: 1 << 20, ReadOnly: true})
	require.NoError(t, err)
	_, err = s.Get(key(1))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// A store whose marker says it was created but whose manifest is gone lost
// its files: it is refused with ErrCorrupt, before Pebble could start an
// empty store in its place.
func TestLostManifest(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, s.Created())
	require.NoError(t, s.Close())
	ms, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	require.NoError(t, err)
	for _, m := range ms {
		require.NoError(t, os.Remove(m))
	}
	_, err = pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20})
	require.ErrorIs(t, err, codec.ErrCorrupt)
	require.Contains(t, err.Error(), "lost its files")
}

// A store still marked "creating" (a crash before its format key was
// durable) opens, and Created marks it complete.
func TestCreatingMarker(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20, FormatVersion: 2})
	require.NoError(t, err)
	require.True(t, s.Marker().Creating)
	require.NoError(t, s.Close())
	b, err := os.ReadFile(filepath.Join(dir, pebblestore.MarkerFile))
	require.NoError(t, err)
	require.Equal(t, "tipkv store format 2 creating\n", string(b))
	s, err = pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20, FormatVersion: 2})
	require.NoError(t, err)
	require.True(t, s.Marker().Exists)
	require.NoError(t, s.Created())
	require.NoError(t, s.Close())
	b, err = os.ReadFile(filepath.Join(dir, pebblestore.MarkerFile))
	require.NoError(t, err)
	require.Equal(t, "tipkv store format 2\n", string(b))
}
