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

// createdStore writes two tables into a new store marked created, and
// returns its directory.
func createdStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeTables(t, dir)
	s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, s.Created())
	require.NoError(t, s.Close())
	return dir
}

// A created store that lost one of Pebble's marker files is refused with
// ErrCorrupt naming what is missing, and left as it was. Without its
// format-version marker Pebble refused it as "not pristine"; without its
// manifest marker Pebble started an empty store in its place and deleted
// every table as obsolete. A marker naming a manifest that is gone, while
// an older manifest is left, is refused the same way (Pebble said only
// that it could not open the file).
func TestLostPebbleMarker(t *testing.T) {
	for _, c := range []struct {
		name, glob, says string
	}{
		{"format-version", "marker.format-version.*", "marker.format-version"},
		{"manifest", "marker.manifest.*", "marker.manifest"},
		{"current manifest", "", "MANIFEST-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := createdStore(t)
			glob := c.glob
			if glob == "" {
				// The manifest the marker names; an older one stays.
				ms, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
				require.NoError(t, err)
				require.GreaterOrEqual(t, len(ms), 2, "Pebble leaves the first manifest after it rotates")
				glob = filepath.Base(ms[len(ms)-1])
			}
			ms, err := filepath.Glob(filepath.Join(dir, glob))
			require.NoError(t, err)
			require.Len(t, ms, 1)
			require.NoError(t, os.Remove(ms[0]))
			before := listDir(t, dir)

			_, err = pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20})
			require.ErrorIs(t, err, codec.ErrCorrupt)
			require.Contains(t, err.Error(), c.says)
			require.Contains(t, err.Error(), "restore it from a backup")
			require.Equal(t, before, listDir(t, dir), "nothing changed: the tables are kept")
		})
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
