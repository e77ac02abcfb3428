package pebblestore

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/tipkv/tipkv/internal/storage"
)

var _ storage.Meter = (*Store)(nil)

// EngineMetrics implements storage.Meter from Pebble's metrics and the
// events the store counted. It reads no file: a few microseconds under
// Pebble's mutex.
func (s *Store) EngineMetrics() (storage.EngineMetrics, error) {
	m, err := s.PebbleMetrics()
	if err != nil {
		return storage.EngineMetrics{}, err
	}
	return s.engineMetrics(m), nil
}

func (s *Store) engineMetrics(m *pebble.Metrics) storage.EngineMetrics {
	out := storage.EngineMetrics{
		DiskUsage:          m.DiskSpaceUsage(),
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
		WALPhysicalSize:    m.WAL.PhysicalSize,
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
		CompactionsStopped: s.compactions.stoppedBy() != nil,
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
