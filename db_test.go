package tipkv_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
)

// put writes one raw key through the Writer seam, as tipkv's packages do.
func put(w tipkv.Writer, key, value string) error {
	return link.Write(w, func(tx *link.Tx) error {
		return tx.Batch.Set([]byte(key), []byte(value))
	})
}

// del removes one raw key through the Writer seam.
func del(w tipkv.Writer, key string) error {
	return link.Write(w, func(tx *link.Tx) error { return tx.Batch.Delete([]byte(key)) })
}

func get(t *testing.T, db *tipkv.DB, key string) (string, error) {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	v, err := s.Get([]byte(key))
	return string(v), err
}

func TestUpdateIsAtomic(t *testing.T) {
	db := testutil.OpenMem(t)
	boom := errors.New("boom")
	err := db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, put(b, "\x06a", "1"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = get(t, db, "\x06a")
	require.ErrorIs(t, err, tipkv.ErrNotFound, "a failed Update must write nothing")

	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, put(b, "\x06a", "1"))
		return put(b, "\x06b", "2")
	}))
	v, err := get(t, db, "\x06b")
	require.NoError(t, err)
	require.Equal(t, "2", v)
}

func TestUpdatePanicWritesNothing(t *testing.T) {
	db := testutil.OpenMem(t)
	require.Panics(t, func() {
		_ = db.Update(func(b *tipkv.Batch) error {
			_ = put(b, "\x06a", "1")
			panic("boom")
		})
	})
	_, err := get(t, db, "\x06a")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
}

func TestBatchAfterUpdateIsRefused(t *testing.T) {
	db := testutil.OpenMem(t)
	var kept *tipkv.Batch
	require.NoError(t, db.Update(func(b *tipkv.Batch) error { kept = b; return nil }))
	require.ErrorIs(t, put(kept, "\x06a", "1"), tipkv.ErrInvalid)
}

func TestReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, put(db, "\x06k", "v"))
	require.NoError(t, db.Close())

	db, err = tipkv.Open(dir, nil)
	require.NoError(t, err)
	defer db.Close()
	v, err := get(t, db, "\x06k")
	require.NoError(t, err)
	require.Equal(t, "v", v)
}

func TestOpenRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644))
	_, err := tipkv.Open(dir, nil)
	require.ErrorIs(t, err, tipkv.ErrFormat)
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, names, 1, "Open must not change a directory it refuses")
}

func TestOpenRefusesNewerFormat(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	marker := filepath.Join(dir, "TIPKV")
	require.NoError(t, os.WriteFile(marker, []byte("tipkv store format 99\n"), 0o644))
	before := dirState(t, dir)

	_, err = tipkv.Open(dir, nil)
	require.ErrorIs(t, err, tipkv.ErrFormat)
	require.ErrorContains(t, err, "format 99")
	require.Equal(t, before, dirState(t, dir), "Open must not change a store it refuses")
}

func TestOpenReadOnlyMissing(t *testing.T) {
	_, err := tipkv.Open(filepath.Join(t.TempDir(), "none"), &tipkv.Options{ReadOnly: true})
	require.ErrorIs(t, err, tipkv.ErrNotFound)
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	db, err = tipkv.Open(dir, &tipkv.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	require.ErrorIs(t, put(db, "\x06a", "1"), tipkv.ErrInvalid)
}

func TestOpenEmptyDirName(t *testing.T) {
	_, err := tipkv.Open("", nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

func TestUseAfterClose(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.ErrorIs(t, db.Close(), tipkv.ErrClosed)
	require.ErrorIs(t, put(db, "\x06a", "1"), tipkv.ErrClosed)
	_, err = get(t, db, "\x06a")
	require.ErrorIs(t, err, tipkv.ErrClosed)
	s, _ := link.StoreOf(db)
	_, err = s.NewIter([]byte{0}, []byte{0xff})
	require.ErrorIs(t, err, tipkv.ErrClosed)
}

// Close while writers and readers run: every call either works or returns
// ErrClosed; nothing panics or hangs.
func TestCloseDuringUse(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, NoSync: true})
	require.NoError(t, err)
	s, _ := link.StoreOf(db)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				var err error
				if g%2 == 0 {
					err = put(db, "\x06k", "v")
				} else {
					var it engine.Iter
					it, err = s.NewIter([]byte{0x06}, []byte{0x07})
					if err == nil {
						for it.First(); it.Valid(); it.Next() {
						}
						err = it.Close()
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	require.NoError(t, db.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, tipkv.ErrClosed)
	}
}

func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(data)
	}
	return out
}

func TestOpenTwiceIsLocked(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	defer db.Close()
	_, err = tipkv.Open(dir, nil)
	require.ErrorIs(t, err, tipkv.ErrLocked)
	require.ErrorContains(t, err, "already open")
}
