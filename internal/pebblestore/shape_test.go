package pebblestore_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
)

// Shape counts the tables and the tombstones that sstables hold, per level.
// One flush makes one L0 table that keeps its tombstones (only compactions
// into the bottom level drop them).
func TestShapeCountsTablesAndTombstones(t *testing.T) {
	s := open(t)
	apply := func(f func(b engine.Batch)) {
		b := s.NewBatch()
		f(b)
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
	}
	apply(func(b engine.Batch) {
		for v := int64(1); v <= 10; v++ {
			require.NoError(t, b.Set(vkey("c", "a", v), []byte("x")))
		}
	})
	apply(func(b engine.Batch) {
		require.NoError(t, b.Delete(vkey("c", "a", 1)))
		require.NoError(t, b.Delete(vkey("c", "a", 2)))
		require.NoError(t, b.DeleteRange(vkey("c", "a", 8), vkey("c", "a", 5)))
	})
	require.NoError(t, s.Flush())

	sh, err := s.Shape()
	require.NoError(t, err)
	require.Len(t, sh.Levels, 7)
	var tables int64
	var entries, point, rng uint64
	for i, l := range sh.Levels {
		require.Equal(t, i, l.Level)
		tables += l.Tables
		entries += l.Entries
		point += l.PointTombstones
		rng += l.RangeTombstones
	}
	require.EqualValues(t, 1, tables)
	require.EqualValues(t, 2, point)
	require.EqualValues(t, 1, rng)
	require.EqualValues(t, 8, entries, "5 live versions and 3 tombstones: the flush drops what they shadow")
	require.Positive(t, sh.DiskUsage)
	require.Positive(t, sh.ReadAmp)

	n, err := s.EstimateDiskUsage(vkey("c", "a", 10), vkey("c", "a", 1))
	require.NoError(t, err)
	require.Positive(t, n)
	n, err = s.EstimateDiskUsage([]byte{0x05}, []byte{0x06})
	require.NoError(t, err)
	require.Zero(t, n, "no table holds family 0x05")

	require.NoError(t, s.Close())
	_, err = s.Shape()
	require.ErrorIs(t, err, engine.ErrClosed)
	_, err = s.EstimateDiskUsage([]byte{0}, []byte{1})
	require.ErrorIs(t, err, engine.ErrClosed)
}
