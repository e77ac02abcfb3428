package pebblestore

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/tipkv/tipkv/internal/storage"
)

var _ storage.Meter = (*Store)(nil)

// EngineMetrics implements storage.Meter from Pebble's metrics, the
// events the store counted and the sizes of the files in the store's
// directory (DiskUsage and WALPhysicalSize, see usage): a few microseconds
// under Pebble's mutex, and a stat of each file.
func (s *Store) EngineMetrics() (storage.EngineMetrics, error) {
	if err := s.enter(); err != nil {
		return storage.EngineMetrics{}, err
	}
	defer s.exit()
	u, err := s.usage()
	if err != nil {
		return storage.EngineMetrics{}, err
	}
	return s.engineMetrics(s.db.Metrics(), u), nil
}

func (s *Store) engineMetrics(m *pebble.Metrics, u usage) storage.EngineMetrics {
	out := storage.EngineMetrics{
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
		Levels:             make([]storage.LevelMetrics, len(m.Levels)),
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
		ObsoleteTableBytes: m.Table.ObsoleteSize,
		OpenSnapshots:      int64(m.Snapshots.Count),
		TableIterators:     m.TableIters,
		Uptime:             m.Uptime,
	}
	for i, l := range m.Levels {
		out.Levels[i] = storage.LevelMetrics{
			Level:     i,
			Sublevels: int(l.Sublevels),
			Tables:    l.TablesCount,
			Bytes:     l.TablesSize,
			Score:     l.Score,
		}
	}
	return out
}
