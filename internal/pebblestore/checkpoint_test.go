package pebblestore_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// A checkpoint whose marker file is missing (cut short before it was
// written) is refused as not a store; with it, it opens.
func TestCheckpointMarkerWrittenLast(t *testing.T) {
	fs := vfs.NewMem()
	s, err := pebblestore.Open("db", pebblestore.Config{FS: fs, CacheSize: 8 << 20, FormatVersion: 2})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Created())
	b := s.NewBatch()
	require.NoError(t, b.Set(vkey("c", "a", 1), []byte("v")))
	require.NoError(t, b.Apply(true))
	require.NoError(t, b.Wait())
	require.NoError(t, b.Close())

	require.NoError(t, s.Checkpoint("cp"))
	require.NoError(t, s.Checkpoint("cut"))
	require.NoError(t, fs.Remove(fs.PathJoin("cut", pebblestore.MarkerFile)))

	_, err = pebblestore.Open("cut", pebblestore.Config{FS: fs, ReadOnly: true, FormatVersion: 2})
	require.ErrorIs(t, err, engine.ErrFormat)

	cp, err := pebblestore.Open("cp", pebblestore.Config{FS: fs, ReadOnly: true, FormatVersion: 2})
	require.NoError(t, err)
	defer cp.Close()
	require.Equal(t, pebblestore.Marker{Exists: true, Format: 2}, cp.Marker())
	v, err := cp.Get(vkey("c", "a", 1))
	require.NoError(t, err)
	require.Equal(t, "v", string(v))
}

func TestEngineMetricsClosed(t *testing.T) {
	s, err := pebblestore.Open("db", pebblestore.Config{FS: vfs.NewMem(), CacheSize: 8 << 20})
	require.NoError(t, err)
	m, err := pebblestore.FiguresOf[level](s)
	require.NoError(t, err)
	require.Len(t, m.Levels, 7)
	require.NoError(t, s.Close())
	_, err = pebblestore.FiguresOf[level](s)
	require.ErrorIs(t, err, engine.ErrClosed)
}
