package pebblestore

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/tipkv/tipkv/engine"
)

// Shape is the state of the LSM tree in plain types, for tools (cmd/tipkv
// stats) that must not import Pebble.
type Shape struct {
	// DiskUsage is the bytes the files in the store's directory take on
	// disk (Store.DiskUsage).
	DiskUsage uint64
	// ReadAmp is the read amplification: L0 sublevels plus non-empty levels.
	ReadAmp int
	// MemTables and MemTableBytes describe the memtables, including the one
	// replaying the WAL of a store opened read-only.
	MemTables     int64
	MemTableBytes uint64
	// WALFiles and WALBytes describe the live write-ahead log.
	WALFiles int64
	WALBytes uint64
	// Levels are L0 to L6, in order.
	Levels []LevelShape
}

// LevelShape is one level of the LSM tree. The entry and tombstone counts
// come from the sstables' properties, so they are exact for physical tables
// and estimates for virtual ones; memtables are not counted.
type LevelShape struct {
	Level     int
	Sublevels int
	Tables    int64
	Bytes     int64
	// Score is Pebble's compaction score: above 1 the level needs one.
	Score float64
	// Entries counts every entry in the level's tables, tombstones
	// included.
	Entries uint64
	// PointTombstones counts DEL and SINGLEDEL entries; RangeTombstones
	// counts range deletions.
	PointTombstones uint64
	RangeTombstones uint64
}

// Shape returns the LSM tree's shape. It reads every sstable's properties,
// which is quick when they are cached and costs a read per table otherwise.
func (s *Store) Shape() (Shape, error) {
	if !s.gate.enter() {
		return Shape{}, engine.ErrClosed
	}
	defer s.gate.exit()
	u, err := s.usage()
	if err != nil {
		return Shape{}, err
	}
	m := s.db.Metrics()
	out := Shape{
		DiskUsage:     u.total,
		ReadAmp:       m.ReadAmp(),
		MemTables:     m.MemTable.Count,
		MemTableBytes: m.MemTable.Size,
		WALFiles:      m.WAL.Files,
		WALBytes:      m.WAL.Size,
	}
	tables, err := s.db.SSTables(pebble.WithProperties())
	if err != nil {
		return Shape{}, err
	}
	for i, l := range m.Levels {
		ls := LevelShape{
			Level:     i,
			Sublevels: int(l.Sublevels),
			Tables:    l.TablesCount,
			Bytes:     l.TablesSize,
			Score:     l.Score,
		}
		if i < len(tables) {
			for _, t := range tables[i] {
				if t.Properties == nil {
					continue
				}
				p := &t.Properties.CommonProperties
				ls.Entries += p.NumEntries
				ls.PointTombstones += p.NumPointDeletions()
				ls.RangeTombstones += p.NumRangeDeletions
			}
		}
		out.Levels = append(out.Levels, ls)
	}
	return out, nil
}

// EstimateDiskUsage returns an estimate of the bytes on disk that hold the
// keys in [lo, hi]: whole sstables inside the range, and a share of the
// tables at its edges. Memtables are not counted.
func (s *Store) EstimateDiskUsage(lo, hi []byte) (uint64, error) {
	if !s.gate.enter() {
		return 0, engine.ErrClosed
	}
	defer s.gate.exit()
	return s.db.EstimateDiskUsage(lo, hi)
}
