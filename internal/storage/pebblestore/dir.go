package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/storage"
)

// MarkerFile names the file that marks a directory as a tipkv store. It is
// written before Pebble creates anything, so Open can refuse a directory
// that is not a tipkv store, or is of a newer format, without changing it.
// It says "creating" until the store's format key is durable (Created), so
// that a store that later loses its files is told apart from one that was
// never finished.
const MarkerFile = "TIPKV"

// Marker is what a directory's marker file said when the store opened.
type Marker struct {
	Exists   bool // the directory held a store before this Open
	Format   int  // the format it names
	Creating bool // the store was never finished (or is new)
}

// Marker returns what the directory's marker file said at Open.
func (s *Store) Marker() Marker { return s.marker }

// Created records in the marker file that the store is complete (its
// format key is durable). It does nothing if the marker says so already
// and names the current format.
func (s *Store) Created() error {
	if !s.marker.Creating && s.marker.Format == s.format {
		return nil
	}
	if err := writeMarker(s.fs, s.dir, s.format, false); err != nil {
		return err
	}
	s.marker.Creating, s.marker.Format = false, s.format
	return nil
}

// isLockError reports whether Pebble failed to take the directory lock:
// fcntl answers EAGAIN (or, as POSIX allows, EACCES) when another process
// holds it, and Pebble says "lock held by current process" for this one.
func isLockError(err error) bool {
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	var pathErr *os.PathError
	if errors.Is(err, syscall.EACCES) && !errors.As(err, &pathErr) {
		return true
	}
	return strings.Contains(err.Error(), "lock held")
}

// prepareDir checks that dir is empty, missing or a tipkv store of a format
// this version reads, and marks a new store as being created. A store whose
// marker says it was created but whose Pebble manifest is gone lost its
// files: it is refused before Pebble can start an empty store in its place.
func prepareDir(fs vfs.FS, dir string, format int, readOnly bool) (Marker, error) {
	names, err := fs.List(dir)
	if err != nil && !os.IsNotExist(err) {
		return Marker{}, err
	}
	if len(names) == 0 {
		if readOnly {
			return Marker{}, fmt.Errorf("read-only: %w", storage.ErrNotFound)
		}
		return Marker{Format: format, Creating: true}, writeMarker(fs, dir, format, true)
	}
	f, err := fs.Open(fs.PathJoin(dir, MarkerFile))
	if err != nil {
		return Marker{}, fmt.Errorf("%w: not a tipkv store (the directory holds files but no %s file)", storage.ErrFormat, MarkerFile)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return Marker{}, err
	}
	v, creating, err := ParseMarker(data)
	if err != nil {
		return Marker{}, fmt.Errorf("%w: %s: %v", storage.ErrFormat, MarkerFile, err)
	}
	if v > format {
		return Marker{}, fmt.Errorf("%w: the store is of format %d; this tipkv reads format %d and older", storage.ErrFormat, v, format)
	}
	if !creating && !hasManifest(names) {
		return Marker{}, fmt.Errorf("%w: the store has lost its files: its %s file says a store was created here, but Pebble's manifest is gone (restore it from a backup)", codec.ErrCorrupt, MarkerFile)
	}
	return Marker{Exists: true, Format: v, Creating: creating}, nil
}

func hasManifest(names []string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, "MANIFEST-") {
			return true
		}
	}
	return false
}

const (
	markerPrefix   = "tipkv store format "
	markerCreating = " creating"
)

// ParseMarker reads a marker file: "tipkv store format N", followed by
// " creating" while the store is being created.
func ParseMarker(data []byte) (format int, creating bool, err error) {
	s := strings.TrimSpace(string(data))
	if !strings.HasPrefix(s, markerPrefix) {
		return 0, false, fmt.Errorf("not a tipkv marker")
	}
	s = strings.TrimPrefix(s, markerPrefix)
	if strings.HasSuffix(s, markerCreating) {
		s, creating = strings.TrimSuffix(s, markerCreating), true
	}
	format, err = strconv.Atoi(s)
	if err != nil || format < 1 {
		return 0, false, fmt.Errorf("bad format number %q", s)
	}
	return format, creating, nil
}

// AppendMarker appends the marker file's content.
func AppendMarker(dst []byte, format int, creating bool) []byte {
	dst = append(dst, markerPrefix...)
	dst = strconv.AppendInt(dst, int64(format), 10)
	if creating {
		dst = append(dst, markerCreating...)
	}
	return append(dst, '\n')
}

// writeMarker writes the marker file, atomically (a temporary file renamed
// over it) and durably.
func writeMarker(fs vfs.FS, dir string, format int, creating bool) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := fs.PathJoin(dir, MarkerFile)
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(AppendMarker(nil, format, creating))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		var d vfs.File
		if d, err = fs.OpenDir(dir); err == nil {
			err = d.Sync()
			_ = d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
