package pebblestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tipkv/tipkv/engine"
)

var _ engine.Checkpointer = (*Store)(nil)

// Checkpoint implements engine.Checkpointer with Pebble's checkpoint:
// tables are hard-linked into dir where the file system allows (dir on the
// same file system as the store), copied otherwise; the write-ahead log
// and manifest are copied. It flushes the log first, so that writes made
// with NoSync before the call are in the copy too. The marker file is
// written last, saying what the store's says: a checkpoint cut short (a
// crash) has none, and Open refuses it as not a tipkv store.
//
// Pebble cannot checkpoint a store opened read-only; nothing writes such a
// store (this process holds its lock and writes nothing), so its files are
// linked and copied as they are.
//
// An existing empty dir is replaced; anything else at dir is refused with
// engine.ErrInvalid, and so are a dir inside the store's directory and a
// store in memory (its copy would be in memory too).
func (s *Store) Checkpoint(dir string) (err error) {
	if s.inMemory {
		return fmt.Errorf("%w: checkpoint: the store is in memory; it has no files to copy", engine.ErrInvalid)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	defer s.f.recoverFatal(&err)
	if err := s.checkpointDir(dir); err != nil {
		return err
	}
	if s.readOnly {
		err = s.copyFiles(dir)
	} else {
		err = s.db.Checkpoint(dir, pebble.WithFlushedWAL())
	}
	if err == nil {
		err = writeMarker(s.fs, dir, s.marker.Format, s.marker.Creating)
	}
	if err != nil {
		_ = s.fs.RemoveAll(dir)
		return fmt.Errorf("tipkv: checkpoint to %s: %w", dir, s.f.wrap(err))
	}
	return nil
}

// copyFiles copies the directory of a store opened read-only to dir:
// tables and blob files (never rewritten) as hard links where it can,
// everything else as copies, but for the lock and the marker file.
func (s *Store) copyFiles(dir string) error {
	names, err := s.fs.List(s.dir)
	if err != nil {
		return err
	}
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range names {
		src, dst := s.fs.PathJoin(s.dir, name), s.fs.PathJoin(dir, name)
		switch {
		case name == "LOCK" || strings.HasPrefix(name, MarkerFile):
			continue
		case strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob"):
			err = vfs.LinkOrCopy(s.fs, src, dst)
		default:
			if st, serr := s.fs.Stat(src); serr != nil || st.IsDir() {
				continue
			}
			err = vfs.Copy(s.fs, src, dst)
		}
		if err != nil {
			return err
		}
	}
	d, err := s.fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkpointDir checks that dir may receive a checkpoint, and removes it
// if it is an empty directory (Pebble wants to create it).
func (s *Store) checkpointDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: checkpoint: empty directory name", engine.ErrInvalid)
	}
	src, err1 := filepath.Abs(s.dir)
	dst, err2 := filepath.Abs(dir)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("tipkv: checkpoint: %w", err)
	}
	if rel, err := filepath.Rel(src, dst); err == nil && (rel == "." || filepath.IsLocal(rel)) {
		return fmt.Errorf("%w: checkpoint: %s is inside the store's directory %s", engine.ErrInvalid, dir, s.dir)
	}
	names, err := s.fs.List(dir)
	switch {
	case os.IsNotExist(err):
		return nil
	case err != nil:
		return fmt.Errorf("tipkv: checkpoint: %w", err)
	case len(names) > 0:
		return fmt.Errorf("%w: checkpoint: %s exists and is not empty", engine.ErrInvalid, dir)
	}
	if err := s.fs.Remove(dir); err != nil {
		return fmt.Errorf("tipkv: checkpoint: %w", err)
	}
	return nil
}
