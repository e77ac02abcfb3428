package tipkv

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// FormatVersion is the store format this version of tipkv writes and reads.
// Open refuses a store of a newer format, and upgrades an older one when it
// opens it for writing (see the package doc, Stability).
//
// Format 2 adds document delete markers (a deleted document's versions are
// never reused) and records how the default value codec names struct
// fields; format 1 stores keep Go field names. Format 3 adds the expiry
// header of document versions with a time to live (versioned.Options.TTL)
// and the escape of documents that start with the byte C1, which an older
// tipkv would read as values that do not decode. Stores of format 1 and 2
// are upgraded in place: their document values that start with C1 (which
// they stored as documents) are escaped, so that every value reads as it
// did (see the package doc, Stability). Format 4 adds the version header:
// every document version written from then on carries its commit time
// (versioned.Doc.Time); versions of older formats keep reading as they did,
// with no time. Upgrading a store of format 3 escapes the few values of
// format 2 it may hold that format 4 would read as a header. A tipkv that
// reads format 3 and older refuses a store of format 4 (ErrFormat).
const FormatVersion = 4

// Options configure a DB. A nil *Options is valid and means the defaults.
type Options struct {
	// InMemory keeps the whole store in memory: nothing is written to dir,
	// and everything is gone after Close. For tests and examples. The
	// default is false.
	InMemory bool

	// NoSync makes writes return before they reach stable engine. A crash
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

	// MemTableSize is the size of one memtable in bytes. It also sets the
	// store's floor on disk: Pebble preallocates each write-ahead log file
	// at about this size and keeps a few for reuse, so a store whose data
	// is small (a queue that churns) takes about 3.3 times MemTableSize on
	// disk (1,000,000 enqueue/pop cycles with 1,000 live messages: 53 MiB
	// at 16 MiB, 13.3 MiB at 4 MiB, 6.7 MiB at 2 MiB), at the cost of one
	// flush per MemTableSize of writes (16, 67 and 135 flushes in that
	// run; BENCHMARKS.md, "Queues"). The default is 16 MiB.
	MemTableSize uint64

	// Clock is where every package of tipkv reads the time: lease ends,
	// delays, dead-letter times, feed positions, retention. Tests inject
	// one to drive time without sleeping. The default is time.Now.
	Clock func() time.Time

	// MaxRetries is how many times DB.Update runs its function again after
	// a commit-time condition failed, on a shared engine (etcd, SQL) where
	// another process wrote what the function read. Negative: never. On
	// Pebble no condition is ever sent and the function runs once. On an
	// engine that can lock (engine.Locker: PostgreSQL, etcd), a write that
	// collided on a document, stream or queue runs again holding that
	// key's lock (the wait for it is its pause), and writes that do not
	// hold it give way at commit (engine.LockHolding), so writers of a hot
	// key take turns: a write then needs about two attempts, not ten.
	// The default is DefaultMaxRetries.
	MaxRetries int

	// Logger receives what the storage engine reports, at these levels:
	// Debug for flushes and compactions; Info when a write stall ends or
	// refused writes resume; Warn for write stalls, a slow or nearly full
	// disk, a flush or compaction that failed and will be retried; Error
	// for background errors, writes refused on a failing disk, corruption
	// and a store that failed. tipkv's packages log their own events there
	// too. Each record has the attribute "event" (its kind) and, for
	// Pebble's events, "info" (Pebble's description) and "error". The
	// handler runs on the engine's goroutines, some of them holding its
	// locks: it must not block for long nor call the DB. The default is
	// nil: nothing is logged (Metrics still counts stalls, slow disks and
	// errors).
	Logger *slog.Logger
}

// DefaultMaxRetries is Options.MaxRetries when it is zero.
const DefaultMaxRetries = 10

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
	if out.MaxRetries == 0 {
		out.MaxRetries = DefaultMaxRetries
	}
	return out
}

// DB is an open tipkv store. It is safe for concurrent use by many
// goroutines. Close it when done; calls after Close return ErrClosed.
type DB struct {
	linkRoot // how versioned and queue reach core (internal/link)
	core     link.DB
	opts     Options
	done     chan struct{} // closed when Close begins (Done)
	doneOnce sync.Once
}

// linkRoot is link.Root under a name of this package, so that embedding it
// adds no exported field or method to DB.
type linkRoot = link.Root

// Open opens the store in dir, creating it if dir is missing or empty.
//
// A directory that holds anything but a tipkv store, or a store of a newer
// format, is refused with ErrFormat and left as it was. A store already
// open, in another process or this one, is refused with ErrLocked. A store
// whose files were lost (its marker says it was created, but Pebble's files
// or its data are gone) is refused with ErrCorrupt.
func Open(dir string, opts *Options) (*DB, error) {
	return open(dir, pebblestore.Config{InMemory: opts != nil && opts.InMemory}, opts.withDefaults())
}

func open(dir string, cfg pebblestore.Config, o Options) (*DB, error) {
	if dir == "" {
		if !cfg.InMemory {
			return nil, fmt.Errorf("%w: open: empty directory name", ErrInvalid)
		}
		dir = "mem"
	}
	cfg.CacheSize, cfg.MemTableSize, cfg.ReadOnly = o.CacheSize, o.MemTableSize, o.ReadOnly
	cfg.Logger = o.Logger
	cfg.FormatVersion = FormatVersion
	ps, err := pebblestore.Open(dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("tipkv: open %s: %w", dir, err)
	}
	db, err := newDB(ps, dir, o, ps.Marker())
	if err != nil {
		_ = ps.Close()
		return nil, err
	}
	if !o.ReadOnly {
		if err := ps.Created(); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("tipkv: open %s: %w", dir, err)
		}
	}
	return db, nil
}

// OpenEngine returns a DB on store, an engine the caller opened: the way
// modules such as etcdkv and sqlkv, or an engine of your own, put tipkv on
// an ordered key-value store other than the embedded Pebble. name says
// where the store is, for messages and DB.Dir. opts is as for Open and may
// be nil; its Pebble fields (InMemory, CacheSize, MemTableSize) are
// ignored.
//
// It checks the store's format as Open does: an empty store gets the
// current format, an older one is upgraded unless opts.ReadOnly, a newer
// one is refused with ErrFormat. The DB owns the store from then on: its
// Close closes it. If OpenEngine fails, the store is left open and the
// caller still owns it.
//
// An engine must meet the contract of package engine and pass both of its
// suites: package engine/enginetest and package tipkvtest.
func OpenEngine(store engine.Store, name string, opts *Options) (*DB, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: open engine: nil store", ErrInvalid)
	}
	return newDB(store, name, opts.withDefaults(), pebblestore.Marker{})
}

// newDB wraps an open store: it checks (and on a new store writes, on an
// older one upgrades) the format key. m describes the directory's marker
// file; engines without a directory pass the zero marker.
func newDB(s engine.Store, name string, o Options, m pebblestore.Marker) (*DB, error) {
	db := &DB{opts: o, done: make(chan struct{})}
	db.core = link.DB{
		Store:      s,
		Caps:       s.Caps(),
		Name:       name,
		Clock:      o.Clock,
		Logger:     o.Logger,
		ReadOnly:   o.ReadOnly,
		NoSync:     o.NoSync,
		MaxRetries: o.MaxRetries,
	}
	if db.core.Logger == nil {
		db.core.Logger = link.Discard
	}
	db.linkRoot = link.NewRoot(&db.core)
	if err := db.checkFormat(m); err != nil {
		return nil, err
	}
	return db, nil
}

// Keys of the meta family (0x00).
var (
	formatKey = metaKey("format")
	// namesKey records how the default value codec names struct fields:
	// "json" (msgpack tags, then json tags, then Go names: stores created
	// at format 2) or "go" (Go field names: stores created at format 1).
	namesKey = metaKey("value-names")
)

func metaKey(name string) []byte {
	return codec.AppendString(codec.AppendFamily(nil, codec.FamilyMeta), name)
}

// checkFormat records the format inside the key space too (a shared engine
// has no directory to put a marker file in) and checks it: a newer format
// is refused, an older one upgraded when the DB may write (upgrade.go), and
// a store whose marker says it was created but whose format key is gone
// has lost its data.
func (db *DB) checkFormat(m pebblestore.Marker) error {
	db.core.Format = FormatVersion
	for {
		err := db.readFormat(m)
		if !errors.Is(err, engine.ErrConditionFailed) && !errors.Is(err, engine.ErrUnknownOutcome) {
			return err
		}
		// Another process of a shared engine began the upgrade first, or
		// the first batch's outcome is unknown: read the format again.
	}
}

func (db *DB) readFormat(m pebblestore.Marker) error {
	mk, err := db.readMeta()
	if err != nil {
		return fmt.Errorf("tipkv: open %s: %w", db.core.Name, err)
	}
	if mk.format == nil {
		if m.Exists && !m.Creating {
			return fmt.Errorf("%w: %s has lost its data: its marker file says a store was created there, but the store is empty (were its write-ahead log or table files deleted?)", ErrCorrupt, db.core.Name)
		}
		if db.opts.ReadOnly {
			return nil
		}
		return db.writeFormat("json")
	}
	n, err := strconv.Atoi(string(mk.format))
	if err != nil {
		return fmt.Errorf("%w: %s: format key holds %q", ErrFormat, db.core.Name, mk.format)
	}
	if n > FormatVersion {
		return fmt.Errorf("%w: %s holds format %d; this tipkv reads format %d and older", ErrFormat, db.core.Name, n, FormatVersion)
	}
	names := mk.names
	if names == nil {
		names = []byte("go") // format 1
	}
	db.core.LegacyNames = string(names) == "go"
	var up upgradeState
	if mk.upgrade != nil {
		if up, err = parseUpgrade(mk.upgrade); err != nil {
			return fmt.Errorf("%s: %w", db.core.Name, err)
		}
	}
	switch {
	case mk.upgrade != nil && n <= up.from:
		return fmt.Errorf("%w: %s holds format %d and an upgrade from format %d", ErrCorrupt, db.core.Name, n, up.from)
	case mk.upgrade != nil && db.opts.ReadOnly:
		return fmt.Errorf("%w: %s: its upgrade from format %d to %d was interrupted, and part of its values are of each format; open it once for writing (without ReadOnly) to finish the upgrade", ErrFormat, db.core.Name, up.from, n)
	case mk.upgrade != nil:
		if err := db.finishUpgrade(&upgradeStats{start: time.Now()}); err != nil {
			return err
		}
		return db.readFormat(m) // upgraded to n: on to FormatVersion if n is older
	case n == FormatVersion:
		return nil
	case db.opts.ReadOnly && db.core.Caps.Shared:
		return fmt.Errorf("%w: %s holds format %d, and another process may upgrade it to %d while this one reads it: open it once for writing (without ReadOnly) to upgrade it", ErrFormat, db.core.Name, n, FormatVersion)
	case db.opts.ReadOnly:
		db.core.Format = n // read by its own format's rules
		return nil
	}
	return db.upgrade(n, mk.format, string(names))
}

// meta holds the meta keys that say a store's format: each nil if absent.
type meta struct {
	format, names, upgrade []byte
}

// readMeta reads the meta keys in one view of the store: another process
// of a shared engine may move them meanwhile.
func (db *DB) readMeta() (mk meta, err error) {
	snap, err := db.core.Store.NewSnapshot()
	if err != nil {
		return meta{}, err
	}
	defer func() {
		if cerr := snap.Close(); err == nil {
			err = cerr
		}
	}()
	for _, f := range []struct {
		key []byte
		dst *[]byte
	}{{formatKey, &mk.format}, {namesKey, &mk.names}, {upgradeKey, &mk.upgrade}} {
		v, err := snap.Get(f.key)
		switch {
		case errors.Is(err, engine.ErrNotFound):
		case err != nil:
			return meta{}, err
		default:
			*f.dst = append([]byte{}, v...) // not nil, even when empty
		}
	}
	return mk, nil
}

// writeFormat writes the current format and the value naming, in one
// synced batch.
func (db *DB) writeFormat(names string) error {
	db.core.LegacyNames = names == "go"
	b := db.core.Store.NewBatch()
	defer b.Close()
	if err := b.Set(formatKey, []byte(strconv.Itoa(FormatVersion))); err != nil {
		return err
	}
	if err := b.Set(namesKey, []byte(names)); err != nil {
		return err
	}
	if err := b.Apply(true); err != nil {
		return fmt.Errorf("tipkv: open %s: write the format: %w", db.core.Name, err)
	}
	if err := b.Wait(); err != nil {
		return fmt.Errorf("tipkv: open %s: write the format: %w", db.core.Name, err)
	}
	return nil
}

// Close waits for reads and commits in flight, wakes every goroutine
// blocked in a queue's Wait or on a document another Update holds (they
// return ErrClosed), and closes the store. An Update whose function is
// still running fails with ErrClosed when it commits; an iteration still
// open (a History loop, say, even the one calling Close) ends with
// ErrClosed at its next step. Later calls on the DB or its handles return
// ErrClosed, and so does a second Close.
func (db *DB) Close() error {
	db.doneOnce.Do(func() { close(db.done) })
	db.core.Services.Close()
	return db.core.Store.Close()
}

// Done returns a channel that is closed when Close begins, before Close
// wakes blocked calls and closes the store, so that a goroutine serving
// the DB (a subscriber's loop, a relay) can select on it and stop at once
// instead of polling for ErrClosed. Calls made after it is closed may
// still be running, or fail with ErrClosed. Every call returns the same
// channel; it is never closed while Close has not been called.
func (db *DB) Done() <-chan struct{} { return db.done }

// Dir returns the directory the DB was opened in (for a shared engine, the
// name it was opened with).
func (db *DB) Dir() string { return db.core.Name }

// admin returns the store's maintenance interface, or an error.
func (db *DB) admin() (engine.Admin, error) {
	a, ok := db.core.Store.(engine.Admin)
	if !ok {
		return nil, fmt.Errorf("%w: this storage engine has no maintenance calls", ErrInvalid)
	}
	return a, nil
}

// Flush writes the in-memory tables to disk. Writes are durable without it
// (through the write-ahead log); it is for benchmarks and tools.
func (db *DB) Flush() error {
	a, err := db.admin()
	if err != nil {
		return err
	}
	return a.Flush()
}

// Compact compacts the whole store, dropping deleted data and reclaiming
// disk space. It can take long on a large store.
//
// A compaction that meets a damaged table (one that fails its checksums)
// stops every compaction until the DB is reopened, the background ones
// too: Compact then returns, at once, an error that matches ErrCorrupt and
// names the table. Reads and writes go on (README: A damaged table).
func (db *DB) Compact() error {
	a, err := db.admin()
	if err != nil {
		return err
	}
	return a.Compact(codec.Keyspace())
}

// DiskUsage returns the store's size on disk in bytes, 0 if the engine does
// not say (or the DB is closed). On Pebble it is the blocks the files in
// the store's directory take, as du counts them (StorageMetrics.DiskUsage
// says what that includes); on a shared engine the engine's own figure.
func (db *DB) DiskUsage() uint64 {
	a, err := db.admin()
	if err != nil {
		return 0
	}
	n, _ := a.DiskUsage()
	return n
}

// Checkpoint writes a copy of the store to dir while it is in use: an
// online backup. The copy is consistent, the store as of one moment during
// the call: it holds every write that returned before the call (NoSync
// writes too), each Update whole or not at all (a document version and its
// outbox message together), and writers go on meanwhile. It is an ordinary
// store: open it (read-only, to leave it as it is) to read it or to restore
// from it, or run the tipkv command on it.
//
// dir must not exist, or be an empty directory; its parents are created.
// On Pebble, tables are hard-linked where dir is on the same file system
// as the store (the copy then costs little space until compactions replace
// those tables), copied otherwise; the write-ahead log is copied. If it
// fails, nothing is left at dir. A store in memory, or an engine that
// cannot checkpoint (etcd, SQL: back those up with their own tools), is
// ErrInvalid, naming the engine.
func (db *DB) Checkpoint(dir string) error {
	c, ok := db.core.Store.(engine.Checkpointer)
	if !ok {
		return fmt.Errorf("%w: checkpoint: the %s engine has no checkpoint; back it up with its own tools", ErrInvalid, engine.EngineName(db.core.Store))
	}
	return c.Checkpoint(dir)
}
