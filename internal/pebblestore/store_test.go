package pebblestore_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

func TestFormatPinnedToNewest(t *testing.T) {
	require.Equal(t, pebble.FormatNewest, pebblestore.FormatMajorVersion,
		"Pebble's newest format moved: choose whether to adopt it, then update the pin")
}

func open(t *testing.T) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open("db", pebblestore.Config{FS: vfs.NewMem(), CacheSize: 8 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func vkey(coll, id string, v int64) []byte {
	k := codec.AppendFamily(nil, codec.FamilyVersions)
	k = codec.AppendString(codec.AppendString(k, coll), id)
	return codec.AppendDesc(k, v)
}

// On a real Pebble store with many versions per document, in memtables and
// sstables: NextPrefix visits each document once and terminates, and
// SeekPrefixGE stays within one document.
func TestNextPrefixAndSeekPrefix(t *testing.T) {
	s := open(t)
	rng := rand.New(rand.NewPCG(7, 7))
	ids := []string{"", "a", "a\x00", "a\x00\x00", "a\xff", "b", "doc-1", "doc-10", "\x00", "\xff\xff"}
	want := map[string]int64{}
	for round := range 2 {
		b := s.NewBatch()
		for _, id := range ids {
			for range 1 + rng.IntN(20) {
				want[id]++
				require.NoError(t, b.Set(vkey("c", id, want[id]), []byte(fmt.Sprint(want[id]))))
			}
		}
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
		if round == 0 {
			require.NoError(t, s.Flush())
		}
	}
	lo := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "c")
	it, err := s.NewIter(lo, codec.PrefixEnd(lo))
	require.NoError(t, err)
	got := map[string]int64{}
	steps := 0
	for ok := it.First(); ok; ok = it.NextPrefix() {
		rest, _ := codec.SkipSegment(it.Key()[1:])
		id, rest, err := codec.DecodeString(rest)
		require.NoError(t, err)
		v, _, err := codec.DecodeDesc(rest)
		require.NoError(t, err)
		require.NotContains(t, got, id, "NextPrefix came back to %q", id)
		got[id] = v
		steps++
		require.Less(t, steps, 100, "NextPrefix does not terminate")
	}
	require.NoError(t, it.Close())
	require.Equal(t, want, got, "the first key of each document is its latest version")

	for _, id := range ids {
		prefix := vkey("c", id, 0)[:len(vkey("c", id, 0))-8]
		it, err := s.NewIter(prefix, codec.PrefixEnd(prefix))
		require.NoError(t, err)
		n := int64(0)
		for ok := it.SeekPrefixGE(prefix); ok; ok = it.Next() {
			n++
		}
		require.NoError(t, it.Close())
		require.Equal(t, want[id], n, "versions of %q", id)
	}
}

// level is the shape FiguresOf fills (tipkv.LevelMetrics in the root).
type level struct {
	Level     int
	Sublevels int
	Tables    int64
	Bytes     int64
	Score     float64
}
