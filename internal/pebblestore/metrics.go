package pebblestore

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Level is the shape of one LSM level's figures: tipkv.LevelMetrics.
type Level interface {
	~struct {
		Level     int
		Sublevels int
		Tables    int64
		Bytes     int64
		Score     float64
	}
}

// Figures are the store's figures in the shape of tipkv.StorageMetrics,
// whose docs say what each field means (L is tipkv.LevelMetrics). The
// root package turns them into a StorageMetrics with one type conversion,
// which compiles only while the two field lists agree: they cannot drift
// apart, and nothing copies them field by field. They are Pebble's, not
// the engine contract's: other engines report through their own
// exporters.
type Figures[L Level] struct {
	DiskUsage uint64

	CacheBytes   int64
	CacheBlocks  int64
	CacheHits    int64
	CacheMisses  int64
	FilterHits   int64
	FilterMisses int64

	MemTables       int64
	MemTableBytes   uint64
	WALFiles        int64
	WALBytes        uint64
	WALPhysicalSize uint64
	WALBytesWritten uint64

	Levels             []L
	ReadAmp            int
	Tombstones         uint64
	CompactionDebt     uint64
	CompactionsRunning int64
	FlushesRunning     int64

	Flushes           int64
	Compactions       int64
	CompactionsFailed int64
	CompactionTime    time.Duration
	WriteStalls       int64
	WriteStallTime    time.Duration
	DiskSlow          int64

	BackgroundErrors   int64
	Errors             int64
	Corruptions        int64
	CompactionsStopped bool
	ObsoleteTableBytes uint64

	OpenSnapshots  int64
	TableIterators int64
	Uptime         time.Duration
}

// FiguresOf returns the figures of s now, from Pebble's metrics, the
// events the store counted and the sizes of the files in the store's
// directory (DiskUsage and WALPhysicalSize, see usage): a few microseconds
// under Pebble's mutex, and a stat of each file.
func FiguresOf[L Level](s *Store) (Figures[L], error) {
	if err := s.enter(); err != nil {
		return Figures[L]{}, err
	}
	defer s.exit()
	u, err := s.usage()
	if err != nil {
		return Figures[L]{}, err
	}
	return figures[L](s, s.db.Metrics(), u), nil
}

func figures[L Level](s *Store, m *pebble.Metrics, u usage) Figures[L] {
	out := Figures[L]{
		DiskUsage:          u.total,
		CacheBytes:         m.BlockCache.Size,
		CacheBlocks:        m.BlockCache.Count,
		CacheHits:          m.BlockCache.Hits,
		CacheMisses:        m.BlockCache.Misses,
		FilterHits:         m.Filter.Hits,
		FilterMisses:       m.Filter.Misses,
		MemTables:          m.MemTable.Count,
		MemTableBytes:      m.MemTable.Size,
		WALFiles:           m.WAL.Files,
		WALBytes:           m.WAL.Size,
		WALPhysicalSize:    u.wal,
		WALBytesWritten:    m.WAL.BytesWritten,
		Levels:             make([]L, len(m.Levels)),
		ReadAmp:            m.ReadAmp(),
		Tombstones:         m.Keys.TombstoneCount,
		CompactionDebt:     m.Compact.EstimatedDebt,
		CompactionsRunning: m.Compact.NumInProgress,
		FlushesRunning:     m.Flush.NumInProgress,
		Flushes:            m.Flush.Count,
		Compactions:        m.Compact.Count,
		CompactionsFailed:  m.Compact.FailedCount,
		CompactionTime:     m.Compact.Duration,
		WriteStalls:        s.f.writeStalls.Load(),
		WriteStallTime:     s.f.stallTime(),
		DiskSlow:           s.f.diskSlow.Load(),
		BackgroundErrors:   s.f.backgroundErr.Load(),
		Errors:             s.f.logged.Load(),
		Corruptions:        int64(len(s.f.corruptions())),
		CompactionsStopped: s.compactions.stoppedBy() != nil,
		ObsoleteTableBytes: m.Table.ObsoleteSize,
		OpenSnapshots:      int64(m.Snapshots.Count),
		TableIterators:     m.TableIters,
		Uptime:             m.Uptime,
	}
	for i, l := range m.Levels {
		out.Levels[i] = L{
			Level:     i,
			Sublevels: int(l.Sublevels),
			Tables:    l.TablesCount,
			Bytes:     l.TablesSize,
			Score:     l.Score,
		}
	}
	return out
}
