package tipkv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
	"github.com/tipkv/tipkv/internal/storage/pebblestore"
)

// FormatVersion is the store format this version of tipkv writes and reads.
// Open refuses a store of a newer format.
const FormatVersion = 1

// markerFile names the file that marks a directory as a tipkv store. It is
// written before Pebble creates anything, so Open can refuse a directory
// that is not a tipkv store, or is of a newer format, without changing it.
const markerFile = "TIPKV"

// Options configure a DB. A nil *Options is valid and means the defaults.
type Options struct {
	// InMemory keeps the whole store in memory: nothing is written to dir,
	// and everything is gone after Close. For tests and examples. The
	// default is false.
	InMemory bool

	// NoSync makes writes return before they reach stable storage. A crash
	// (of the machine, or of the process with NoSync) can then lose the
	// most recent writes, though never part of a batch and never an earlier
	// write while a later one survives: the store reopens consistent. The
	// default is false: every write is synced before it returns.
	NoSync bool

	// ReadOnly opens an existing store without writing to it; writes fail.
	// The default is false.
	ReadOnly bool

	// CacheSize is the block cache size in bytes. Pebble charges memtables
	// to it too, so it should be several times MemTableSize. The default is
	// 128 MiB.
	CacheSize int64

	// MemTableSize is the size of one memtable in bytes. The default is
	// 16 MiB.
	MemTableSize uint64

	// Clock is where every package of tipkv reads the time: lease ends,
	// delays, dead-letter times, feed positions, retention. Tests inject
	// one to drive time without sleeping. The default is time.Now.
	Clock func() time.Time
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.CacheSize <= 0 {
		out.CacheSize = 128 << 20
	}
	if out.MemTableSize == 0 {
		out.MemTableSize = 16 << 20
	}
	if out.Clock == nil {
		out.Clock = time.Now
	}
	return out
}

// DB is an open tipkv store. It is safe for concurrent use by many
// goroutines. Close it when done; calls after Close return ErrClosed.
type DB struct {
	dir      string
	opts     Options
	store    *pebblestore.Store
	services link.Registry
}

// Open opens the store in dir, creating it if dir is missing or empty.
//
// A directory that holds anything but a tipkv store, or a store of a newer
// format, is refused with ErrFormat and left as it was. A store already
// open in another process is refused with an error that says so.
func Open(dir string, opts *Options) (*DB, error) {
	o := opts.withDefaults()
	fs := vfs.Default
	if o.InMemory {
		fs = vfs.NewMem()
		if dir == "" {
			dir = "mem"
		}
	}
	return open(dir, fs, o)
}

func open(dir string, fs vfs.FS, o Options) (*DB, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: open: empty directory name", ErrInvalid)
	}
	if err := prepareDir(fs, dir, o.ReadOnly); err != nil {
		return nil, err
	}
	ps, err := pebblestore.Open(dir, pebblestore.Config{
		FS:           fs,
		CacheSize:    o.CacheSize,
		MemTableSize: o.MemTableSize,
		ReadOnly:     o.ReadOnly,
	})
	if err != nil {
		if isLockError(err) {
			return nil, fmt.Errorf("%w: open %s: the store is already open, in another process or this one (%v)", ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("tipkv: open %s: %w", dir, err)
	}
	db := &DB{dir: dir, opts: o, store: ps}
	if err := db.checkFormatKey(); err != nil {
		_ = ps.Close()
		return nil, err
	}
	return db, nil
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
// this version reads, and marks a new store.
func prepareDir(fs vfs.FS, dir string, readOnly bool) error {
	names, err := fs.List(dir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("tipkv: open %s: %w", dir, err)
	}
	if len(names) == 0 {
		if readOnly {
			return fmt.Errorf("tipkv: open %s read-only: %w", dir, ErrNotFound)
		}
		return writeMarker(fs, dir)
	}
	f, err := fs.Open(fs.PathJoin(dir, markerFile))
	if err != nil {
		return fmt.Errorf("%w: %s is not a tipkv store (it holds files but no %s file)", ErrFormat, dir, markerFile)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return fmt.Errorf("tipkv: open %s: %w", dir, err)
	}
	v, err := parseMarker(data)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrFormat, filepath.Join(dir, markerFile), err)
	}
	if v > FormatVersion {
		return fmt.Errorf("%w: %s holds format %d; this tipkv reads format %d and older", ErrFormat, dir, v, FormatVersion)
	}
	return nil
}

const markerPrefix = "tipkv store format "

func parseMarker(data []byte) (int, error) {
	s := strings.TrimSpace(string(data))
	if !strings.HasPrefix(s, markerPrefix) {
		return 0, fmt.Errorf("not a tipkv marker")
	}
	v, err := strconv.Atoi(strings.TrimPrefix(s, markerPrefix))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("bad format number %q", strings.TrimPrefix(s, markerPrefix))
	}
	return v, nil
}

func writeMarker(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tipkv: create %s: %w", dir, err)
	}
	path := fs.PathJoin(dir, markerFile)
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("tipkv: create %s: %w", path, err)
	}
	_, err = fmt.Fprintf(f, "%s%d\n", markerPrefix, FormatVersion)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		var d vfs.File
		if d, err = fs.OpenDir(dir); err == nil {
			err = d.Sync()
			_ = d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("tipkv: create %s: %w", path, err)
	}
	return nil
}

var formatKey = codec.AppendString(codec.AppendFamily(nil, codec.FamilyMeta), "format")

// checkFormatKey records the format inside the key space too (a distributed
// engine has no directory to put a marker file in) and checks it.
func (db *DB) checkFormatKey() error {
	v, err := db.store.Get(formatKey)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		if db.opts.ReadOnly {
			return nil
		}
		b := db.store.NewBatch()
		defer b.Close()
		if err := b.Set(formatKey, []byte(strconv.Itoa(FormatVersion))); err != nil {
			return err
		}
		if err := b.Apply(true); err != nil {
			return err
		}
		return b.Wait()
	case err != nil:
		return fmt.Errorf("tipkv: open %s: %w", db.dir, err)
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return fmt.Errorf("%w: %s: format key holds %q", ErrFormat, db.dir, v)
	}
	if n > FormatVersion {
		return fmt.Errorf("%w: %s holds format %d; this tipkv reads format %d and older", ErrFormat, db.dir, n, FormatVersion)
	}
	return nil
}

// Close waits for reads and writes in flight, wakes every goroutine blocked
// in a queue's Wait (they return ErrClosed), and closes the store. Later
// calls on the DB or its handles return ErrClosed, and so does a second
// Close.
func (db *DB) Close() error {
	db.services.Close()
	return db.store.Close()
}

// Dir returns the directory the DB was opened in.
func (db *DB) Dir() string { return db.dir }

// Flush writes the in-memory tables to disk. Writes are durable without it
// (through the write-ahead log); it is for benchmarks and tools.
func (db *DB) Flush() error { return db.store.Flush() }

// Compact compacts the whole store, dropping deleted data and reclaiming
// disk space. It can take long on a large store.
func (db *DB) Compact() error {
	return db.store.Compact([]byte{0x00}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
}

// DiskUsage returns the store's size on disk in bytes.
func (db *DB) DiskUsage() uint64 { return db.store.DiskUsage() }

// Metrics returns a human-readable description of the storage engine's
// state: levels, files, tombstones, caches.
func (db *DB) Metrics() string { return db.store.Metrics() }

func init() {
	link.Store = func(db any) (storage.Store, error) {
		d, ok := db.(*DB)
		if !ok || d == nil {
			return nil, fmt.Errorf("%w: nil *tipkv.DB", ErrInvalid)
		}
		return d.store, nil
	}
	link.Services = func(db any) (*link.Registry, error) {
		d, ok := db.(*DB)
		if !ok || d == nil {
			return nil, fmt.Errorf("%w: nil *tipkv.DB", ErrInvalid)
		}
		return &d.services, nil
	}
	link.Write = write
	link.Clock = func(db any) (func() time.Time, error) {
		d, ok := db.(*DB)
		if !ok || d == nil {
			return nil, fmt.Errorf("%w: nil *tipkv.DB", ErrInvalid)
		}
		return d.opts.Clock, nil
	}
}
