package storage

import (
	"path"
	"reflect"
	"strings"
	"time"
)

// Meter is implemented by engines that report figures for monitoring. It
// must be cheap: callers poll it every few seconds.
type Meter interface {
	// EngineMetrics returns the engine's figures now.
	EngineMetrics() (EngineMetrics, error)
}

// EngineMetrics are an engine's figures, in plain types. Pebble fills them
// all; an engine without an LSM tree leaves its fields zero. Counters
// count from the moment the store was opened.
type EngineMetrics struct {
	// DiskUsage is the bytes the files in the store's directory take on
	// disk: the blocks allocated to each (what du reports, not du
	// --apparent-size), so that the write-ahead log's preallocated space
	// counts. Tables, logs, manifest and obsolete files not yet deleted.
	DiskUsage uint64

	// Block cache: its size in bytes (shared with the memtables), blocks,
	// and lookups that found their block and that had to read it.
	CacheBytes   int64
	CacheBlocks  int64
	CacheHits    int64
	CacheMisses  int64
	FilterHits   int64 // bloom filter lookups that saved a block read
	FilterMisses int64 // lookups the filter let through

	// Memtables (the newest writes, before a flush) and the write-ahead log.
	MemTables       int64
	MemTableBytes   uint64
	WALFiles        int64
	WALBytes        uint64 // live data in the log
	WALPhysicalSize uint64 // blocks of the log's files on disk: live, recycled, preallocated
	WALBytesWritten uint64 // counter: bytes written to the log

	// The LSM tree: one entry per level, L0 to L6.
	Levels []LevelMetrics
	// ReadAmp is the read amplification: L0 sublevels plus the other
	// non-empty levels, the tables a read may consult.
	ReadAmp int
	// Tombstones estimates the point and range deletions in the tables.
	Tombstones uint64
	// CompactionDebt estimates the bytes compactions must rewrite for the
	// tree to reach its target shape.
	CompactionDebt uint64
	// CompactionsRunning and FlushesRunning are in progress now.
	CompactionsRunning int64
	FlushesRunning     int64

	// Counters.
	Flushes            int64
	Compactions        int64
	CompactionsFailed  int64
	CompactionTime     time.Duration
	WriteStalls        int64         // Pebble stopped writes for memtables or L0 to drain
	WriteStallTime     time.Duration // how long writes were stopped, in total
	DiskSlow           int64         // a disk operation took longer than Pebble's threshold
	BackgroundErrors   int64         // flushes and compactions that failed (Pebble retries them)
	Errors             int64         // other errors the engine logged (an obsolete file it could not delete)
	Corruptions        int64         // files found corrupt
	ObsoleteTableBytes uint64        // tables no longer needed, not deleted yet

	// OpenSnapshots are held now: an old snapshot keeps deleted data from
	// being dropped. TableIterators are sstable iterators open now: a
	// number that only grows is an iterator never closed.
	OpenSnapshots  int64
	TableIterators int64
	Uptime         time.Duration
}

// LevelMetrics is one level of an LSM tree.
type LevelMetrics struct {
	Level     int
	Sublevels int // L0 only: its read amplification
	Tables    int64
	Bytes     int64
	// Score is the engine's compaction score: at 1 or more the level is
	// due for compaction.
	Score float64
}

// EngineName returns a short name for the engine s: the name of the
// package that implements it without "store" or "kv" ("pebble" for
// pebblestore, "etcd" for etcdkv, "sql" for sqlkv).
func EngineName(s any) string {
	t := reflect.TypeOf(s)
	if t == nil {
		return "none"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() == "" {
		return t.String()
	}
	name := path.Base(t.PkgPath())
	for _, suffix := range []string{"store", "kv"} {
		if n := strings.TrimSuffix(name, suffix); n != "" {
			name = n
		}
	}
	return name
}
