package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/atomicfs"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
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

// Dir returns the directory the store was opened in.
func (s *Store) Dir() string { return s.dir }

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
// marker says it was created but whose Pebble manifest, or one of Pebble's
// marker files, is gone lost its files: it is refused before Pebble can
// start an empty store in its place (which it does without the manifest
// marker, deleting every table as obsolete).
func prepareDir(fs vfs.FS, dir string, format int, readOnly bool) (Marker, error) {
	names, err := fs.List(dir)
	if err != nil && !os.IsNotExist(err) {
		return Marker{}, err
	}
	if len(names) == 0 {
		if readOnly {
			return Marker{}, fmt.Errorf("read-only: %w", engine.ErrNotFound)
		}
		return Marker{Format: format, Creating: true}, writeMarker(fs, dir, format, true)
	}
	f, err := fs.Open(fs.PathJoin(dir, MarkerFile))
	if err != nil {
		return Marker{}, fmt.Errorf("%w: the directory is not a tipkv store (it holds files but no %s file)", engine.ErrFormat, MarkerFile)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return Marker{}, err
	}
	v, creating, err := ParseMarker(data)
	if err != nil {
		return Marker{}, fmt.Errorf("%w: %s: %v", engine.ErrFormat, MarkerFile, err)
	}
	if v > format {
		return Marker{}, fmt.Errorf("%w: the store is of format %d; this tipkv reads format %d and older", engine.ErrFormat, v, format)
	}
	if !creating && !hasPrefix(names, "MANIFEST-") {
		return Marker{}, fmt.Errorf("%w: the store has lost its files: its %s file says a store was created here, but Pebble's manifest is gone (restore it from a backup)", codec.ErrCorrupt, MarkerFile)
	}
	if !creating {
		for _, m := range pebbleMarkers {
			if !hasPrefix(names, "marker."+m.name+".") {
				return Marker{}, fmt.Errorf("%w: the store has lost a file: its %s file says a store was created here, but Pebble's marker.%s.* file, %s, is gone (restore it from a backup)", codec.ErrCorrupt, MarkerFile, m.name, m.what)
			}
		}
	}
	if err := checkManifest(fs, dir, !creating); err != nil {
		return Marker{}, err
	}
	return Marker{Exists: true, Format: v, Creating: creating}, nil
}

// pebbleMarkers are the marker files Pebble keeps in a store it created
// (its atomicfs markers: an empty file whose name holds the value). Pebble
// reads both at Open; without the manifest marker it takes the directory
// for a new store.
var pebbleMarkers = []struct{ name, what string }{
	{"format-version", "which records Pebble's format version"},
	{"manifest", "which names Pebble's current manifest"},
}

// checkManifest checks the current manifest chunk by chunk: in a created
// store, the one the manifest marker names must be there. Pebble's own
// replay stops at the first bad record as if the file ended there, which is
// right for a torn tail (a crash during the last write) but silently forgets
// every table recorded after a flipped byte in the middle, and Pebble then
// deletes those tables as obsolete. Its record reader does not tell the
// two apart for manifests, so this does: a bad chunk followed anywhere
// later in the file by a chunk whose checksum holds is damage, not a tear.
func checkManifest(fs vfs.FS, dir string, created bool) error {
	m, name, err := atomicfs.LocateMarker(fs, dir, "manifest")
	if err != nil {
		return nil // not a store Pebble finished creating: Pebble decides
	}
	_ = m.Close()
	if name == "" {
		return nil
	}
	f, err := fs.Open(fs.PathJoin(dir, name))
	if created && errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: the store has lost its current manifest: Pebble's manifest marker names %s, which is gone (restore it from a backup)", codec.ErrCorrupt, name)
	}
	if err != nil {
		return nil // Pebble reports it
	}
	data, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("read manifest %s: %w", name, err)
	}
	if off := damagedAt(data); off >= 0 {
		return fmt.Errorf("%w: manifest %s is damaged at byte %d: a valid record follows the bad one, so this is not a torn write; opening would forget the tables recorded after it (restore from a backup)", codec.ErrCorrupt, name, off)
	}
	return nil
}

// The manifest's record format (Pebble's record package, LevelDB's log
// format): 32 KiB blocks of chunks, each a 7-byte header (masked CRC-32C of
// type and payload, 2-byte length, 1-byte type 1-4) and its payload; a
// block's last 6 bytes or fewer are zero padding.
const (
	recordBlock  = 32 << 10
	recordHeader = 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkAt reports the length of a valid chunk at off, or -1.
func chunkAt(b []byte, off int) int {
	if off+recordHeader > len(b) {
		return -1
	}
	length := int(binary.LittleEndian.Uint16(b[off+4 : off+6]))
	typ := b[off+6]
	end := off + recordHeader + length
	if typ < 1 || typ > 4 || end > len(b) || end > (off/recordBlock+1)*recordBlock {
		return -1
	}
	c := crc32.Checksum(b[off+6:end], castagnoli)
	if binary.LittleEndian.Uint32(b[off:off+4]) != (c>>15|c<<17)+0xa282ead8 {
		return -1
	}
	return recordHeader + length
}

// damagedAt returns the offset of a bad chunk that a valid chunk follows,
// or -1 if the file is whole or merely torn at its end.
func damagedAt(b []byte) int {
	off := 0
	for off < len(b) {
		blockEnd := (off/recordBlock + 1) * recordBlock
		if blockEnd-off < recordHeader {
			off = blockEnd // padding
			continue
		}
		if n := chunkAt(b, off); n > 0 {
			off += n
			continue
		}
		if allZero(b[off:min(blockEnd, len(b))]) {
			off = blockEnd // the rest of the block is padding
			continue
		}
		for later := off + 1; later+recordHeader <= len(b); later++ {
			if chunkAt(b, later) > 0 {
				return off
			}
		}
		return -1 // a torn tail
	}
	return -1
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// hasPrefix reports whether a name in names begins with prefix.
func hasPrefix(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
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
