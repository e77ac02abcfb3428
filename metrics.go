package tipkv

import (
	"cmp"
	"slices"
	"time"

	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// Metrics are a DB's figures at one moment, for dashboards and alerts: the
// storage engine's, and those of the queues, collections and streams that
// this process serves. DB.Metrics returns them; the nested module
// github.com/tipkv/tipkv/metrics exports them to Prometheus and
// OpenTelemetry. README.md, "Operating tipkv", says which to watch.
//
// Counters (the fields documented as counting) start at zero when the DB
// opens and count what this process did; gauges are the state now. A
// Metrics is a copy: the caller may keep it.
type Metrics struct {
	// Engine names the storage engine: "pebble", "etcd" or "sql".
	Engine string

	// Storage are the engine's figures. Pebble fills them all; engines
	// shared over the network (etcd, SQL) leave them zero: watch those
	// with their own exporters.
	Storage StorageMetrics

	// Queues and Collections have one entry per queue and collection a
	// package serves in this process, sorted by name. The packages fill
	// them as they open handles (see each package's doc for what it
	// reports); they are empty until one does.
	Queues      []QueueMetrics
	Collections []CollectionMetrics
	// Streams is always empty: no package reports per-stream figures (a
	// feed may hold millions of streams); Feeds has the totals.
	//
	// Deprecated: nothing fills it, and the exporters publish nothing
	// from it. It will be removed.
	Streams []StreamMetrics

	// Feeds and Retention are this process's figures for every feed of
	// the DB and for the background retention passes (versioned package:
	// FeedRetention and Options.TTL).
	Feeds     FeedMetrics
	Retention RetentionMetrics
}

// StorageMetrics are the storage engine's figures. Counters count since
// the DB opened; everything else is the state now.
type StorageMetrics struct {
	// DiskUsage is the bytes the files in the store's directory take on
	// disk: the blocks the file system allocated to each, as du reports
	// them (not du --apparent-size), so that an alert on it sees what
	// fills the disk. That includes the space Pebble preallocates to the
	// write-ahead log (110% of the memtable size per log, on Linux, which
	// the log's length does not show), tables, the manifest, and obsolete
	// files not deleted yet. A file system that does not report blocks
	// (memory, Windows) counts the files' lengths. The same as
	// DB.DiskUsage.
	DiskUsage uint64

	// The block cache, shared with the memtables (Options.CacheSize): its
	// bytes and blocks, and counters of reads that found their block in it
	// (hits) and that read it from disk (misses). See CacheHitRate.
	CacheBytes  int64
	CacheBlocks int64
	CacheHits   int64
	CacheMisses int64
	// Bloom filter counters: FilterHits are lookups of a missing key that
	// the filter answered without reading a block, FilterMisses lookups it
	// let through.
	FilterHits   int64
	FilterMisses int64

	// The memtables (the newest writes, before a flush writes them to a
	// table) and the write-ahead log: live files, live bytes, the bytes
	// its files take on disk (counted as DiskUsage counts them: the live
	// logs, those kept for recycling, and the space preallocated to them),
	// and a counter of bytes written to it.
	MemTables       int64
	MemTableBytes   uint64
	WALFiles        int64
	WALBytes        uint64
	WALPhysicalSize uint64
	WALBytesWritten uint64

	// Levels are the LSM tree's levels, L0 to L6.
	Levels []LevelMetrics
	// ReadAmp is the read amplification: L0's sublevels plus the other
	// non-empty levels, the tables a read may have to consult.
	ReadAmp int
	// Tombstones estimates the deletions (point and range) still in the
	// tables: deleted data a compaction has not dropped yet.
	Tombstones uint64
	// CompactionDebt estimates the bytes compactions must rewrite for the
	// tree to reach its target shape.
	CompactionDebt uint64
	// CompactionsRunning and FlushesRunning are in progress now.
	CompactionsRunning int64
	FlushesRunning     int64

	// Counters of flushes, compactions (and those that failed) and the
	// time compactions took.
	Flushes           int64
	Compactions       int64
	CompactionsFailed int64
	CompactionTime    time.Duration
	// WriteStalls counts the times the engine stopped writes until
	// memtables flushed or L0 compacted; WriteStallTime is how long they
	// lasted, the stall in progress included.
	WriteStalls    int64
	WriteStallTime time.Duration
	// DiskSlow counts disk writes and syncs that took longer than the
	// engine's threshold (5 seconds on Pebble).
	DiskSlow int64
	// BackgroundErrors counts flushes and compactions that failed (the
	// engine retries them); Errors other errors the engine logged (an
	// obsolete file it could not delete); Corruptions the files found
	// corrupt.
	BackgroundErrors int64
	Errors           int64
	Corruptions      int64
	// CompactionsStopped is set once a compaction met a corrupt table: the
	// engine runs no compaction until the DB is reopened (Compact returns
	// the error, and writes are refused before L0 fills). Restore the store
	// from a backup.
	CompactionsStopped bool
	// ObsoleteTableBytes are tables no longer needed and not deleted yet
	// (an open iterator or snapshot, or a checkpoint in progress, holds
	// them).
	ObsoleteTableBytes uint64

	// OpenSnapshots are the snapshots open now: an old snapshot keeps
	// deleted data from being dropped. TableIterators are the table
	// iterators open now: a figure that only grows is an iteration never
	// closed.
	OpenSnapshots  int64
	TableIterators int64
	// Uptime is how long the DB has been open.
	Uptime time.Duration
}

// LevelMetrics is one level of the LSM tree.
type LevelMetrics struct {
	// Level is 0 to 6.
	Level int
	// Sublevels is L0's read amplification (0 or 1 on other levels).
	Sublevels int
	// Tables and Bytes are the level's tables and their size.
	Tables int64
	Bytes  int64
	// Score is the engine's compaction score: at 1 or more the level is
	// due for compaction, and a score that stays high is compaction
	// falling behind.
	Score float64
}

// CacheHitRate is CacheHits / (CacheHits + CacheMisses), in [0, 1]: the
// share of block reads the cache served since the DB opened. 0 before any
// read.
func (s StorageMetrics) CacheHitRate() float64 {
	if n := s.CacheHits + s.CacheMisses; n > 0 {
		return float64(s.CacheHits) / float64(n)
	}
	return 0
}

// Tables is the number of tables in every level.
func (s StorageMetrics) Tables() int64 {
	var n int64
	for _, l := range s.Levels {
		n += l.Tables
	}
	return n
}

// QueueMetrics are one queue's figures, as the queue package reports them.
type QueueMetrics struct {
	Name string

	// Gauges: messages in the queue (ready, leased and delayed; dead
	// letters apart), of them leased to a consumer now and delayed (not
	// visible before their time), and dead letters. Read from memory, they
	// are known only where the process is the queue's only writer (Pebble:
	// Gauges is true); on a shared engine only the store knows them, they
	// are 0 with Gauges false, the exporters leave them out, and the
	// queue's Stats reads them from the store.
	Depth       int64
	Leased      int64
	Delayed     int64
	DeadLetters int64
	Gauges      bool

	// Counters: messages enqueued; deliveries (each message a Receive or
	// Pop hands out, every time it does), of them redeliveries (after a
	// lease ended or was released); acknowledgements; and messages moved
	// to the dead letters.
	Enqueued     uint64
	Deliveries   uint64
	Redeliveries uint64
	Acks         uint64
	DeadLettered uint64
}

// CollectionMetrics are one collection's figures, as the versioned package
// reports them.
type CollectionMetrics struct {
	Name string
	// Writes counts the versions written (puts and delete markers);
	// Removed the versions removed (pruned, purged, or by retention).
	Writes  uint64
	Removed uint64
}

// FeedMetrics are the figures of all the feeds of a DB together, as the
// versioned package reports them (per stream there are none: see
// StreamMetrics).
type FeedMetrics struct {
	// Appends counts the events appended by this process, counted when
	// their Update commits.
	Appends uint64
	// Retentions are the figures of each feed retention
	// (versioned.FeedRetention) that this process has completed a pass
	// of, one per prefix of stream names it bounds (a feed, as retention
	// sees one), sorted by the prefix.
	Retentions []FeedRetentionMetrics
}

// FeedRetentionMetrics are the figures of the retention of the streams
// under one prefix, as the versioned package reports them.
type FeedRetentionMetrics struct {
	// Streams is the prefix (versioned.FeedRetention.Streams); "" is
	// every stream of the DB.
	Streams string
	// StaleGroups is a gauge: the consumer groups that the latest
	// completed pass found holding its trim back with an event unhandled
	// for longer than versioned.FeedRetention.StaleGroups (each is also
	// logged at Warn). Retentions of one prefix with different bounds
	// report the greatest of their counts.
	StaleGroups int64
}

// RetentionMetrics count the retention passes of this process: feed
// trims (Feed.Retain, by the background trimmer or a caller) and purges
// of expired documents (Collection.PurgeExpired). A failed pass is also
// logged (Options.Logger, Warn) with its error.
type RetentionMetrics struct {
	FeedPasses, FeedFailures   uint64
	StreamsTrimmed             uint64 // streams a feed pass dropped events from
	PurgePasses, PurgeFailures uint64
	DocumentsPurged            uint64 // documents a purge dropped: expired
	GroupsDropped              uint64 // stale consumer groups a feed pass dropped (FeedRetention.DropStaleGroups)
}

// StreamMetrics are one feed stream's figures. The versioned package does
// not report them: a feed may hold millions of streams, and one entry
// each would make Metrics as large as the feed; Streams stays empty, and
// FeedMetrics has the totals of all streams.
//
// Deprecated: nothing reports it (see Metrics.Streams). It will be
// removed.
type StreamMetrics struct {
	Name string
	// Appends counts the events appended; Removed the events removed
	// (trimmed, or by retention).
	Appends uint64
	Removed uint64
}

// Metrics returns the DB's figures now. It reads no data: on Pebble it
// takes about 10 microseconds, a fraction of one more per queue and
// collection (BenchmarkMetrics), and a stat of each file in the
// store's directory for DiskUsage and WALPhysicalSize (about 10
// microseconds a file on a busy 2-core machine: 0.1-0.5 ms for a store of
// 10 to 40 files), so it can be polled every few seconds. On Pebble, after
// Close it returns ErrClosed.
func (db *DB) Metrics() (Metrics, error) {
	m := Metrics{Engine: engine.EngineName(db.core.Store)}
	if ps, ok := db.core.Store.(*pebblestore.Store); ok {
		f, err := pebblestore.FiguresOf[LevelMetrics](ps)
		if err != nil {
			return Metrics{}, err
		}
		m.Storage = StorageMetrics(f) // compiles only while the field lists agree
	}
	link.MetersOf[Metrics](&db.core.Services).Fill(&m)
	slices.SortFunc(m.Queues, func(a, b QueueMetrics) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(m.Collections, func(a, b CollectionMetrics) int { return cmp.Compare(a.Name, b.Name) })
	return m, nil
}

// EngineReport returns the storage engine's own account of its state, for
// people: on Pebble its table of levels, compactions, caches and
// write-ahead log (what Metrics returned before it returned figures).
// It takes about a millisecond. It returns "" if the engine has none or
// the DB is closed.
func (db *DB) EngineReport() string {
	a, err := db.admin()
	if err != nil {
		return ""
	}
	m, _ := a.Metrics()
	return m
}
