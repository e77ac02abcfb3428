package pebblestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// The corrupt-compaction fixture: three tables in L0, written with
// automatic compactions off. The first holds keys of its own (the
// untouched keys, far from the others); the second, the one the tests
// damage, the even keys 2..2*perTable; the third the odd keys between, so
// that a compaction out of L0 must merge the second with the third and
// read every block of it.
const (
	untouchedBase = 1_000_000
	untouched     = 200
)

// writeOverlapping writes the fixture in dir and returns the path of the
// table to damage.
func writeOverlapping(t *testing.T, dir string) string {
	t.Helper()
	s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20})
	require.NoError(t, err) // the store's marker
	require.NoError(t, s.Close())
	cache := pebble.NewCache(1 << 20)
	defer cache.Unref()
	opts := pebblestore.Options(pebblestore.Config{}, cache)
	opts.DisableAutomaticCompactions = true
	db, err := pebble.Open(dir, opts)
	require.NoError(t, err)
	before := ssts(t, dir)
	var tables []string
	for _, keys := range [][]int{
		seq(untouchedBase, untouched, 1),
		seq(2, perTable, 2),
		seq(3, perTable, 2),
	} {
		b := db.NewBatch()
		for _, k := range keys {
			require.NoError(t, b.Set(key(k), []byte(fmt.Sprintf("value-%d-%090d", k, k)), nil))
		}
		require.NoError(t, b.Commit(pebble.Sync))
		require.NoError(t, db.Flush())
		now := ssts(t, dir)
		require.Len(t, now, len(before)+1, "one table per flush")
		tables = append(tables, now[len(now)-1])
		before = now
	}
	m := db.Metrics()
	require.EqualValues(t, 3, m.Levels[0].TablesCount, "the three tables stay in L0")
	require.NoError(t, db.Close())
	return tables[1]
}

func seq(from, n, step int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i*step
	}
	return out
}

// ssts returns the tables in dir, oldest (lowest number) first.
func ssts(t *testing.T, dir string) []string {
	t.Helper()
	ts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NoError(t, err)
	sort.Strings(ts)
	return ts
}

// blockOffset returns an offset inside the block of kind of the table at
// path: the middle of its first data block, of its index, filter,
// properties and meta-index blocks, or of its footer.
func blockOffset(t *testing.T, path, kind string) int {
	t.Helper()
	f, err := vfs.Default.Open(path)
	require.NoError(t, err)
	readable, err := sstable.NewSimpleReadable(f)
	require.NoError(t, err)
	opts := pebblestore.Options(pebblestore.Config{}, nil)
	opts.EnsureDefaults()
	r, err := sstable.NewReader(context.Background(), readable, opts.MakeReaderOptions())
	require.NoError(t, err)
	defer r.Close()
	l, err := r.Layout()
	require.NoError(t, err)
	h := map[string]struct{ off, n uint64 }{
		"data":       {l.Data[0].Offset, l.Data[0].Length},
		"index":      {l.Index[0].Offset, l.Index[0].Length},
		"properties": {l.Properties.Offset, l.Properties.Length},
		"metaindex":  {l.MetaIndex.Offset, l.MetaIndex.Length},
		"footer":     {l.Footer.Offset, l.Footer.Length},
	}
	if len(l.Filter) > 0 {
		h["filter"] = struct{ off, n uint64 }{l.Filter[0].Offset, l.Filter[0].Length}
	}
	b, ok := h[kind]
	require.True(t, ok, "table %s has no %s block", path, kind)
	require.Positive(t, b.n, "%s block of %s", kind, path)
	return int(b.off + b.n/2)
}

// compactChild opens the damaged store and compacts it, reporting the
// outcome. Once compactions have stopped it waits for the compactions in
// flight to end, then counts those that begin in the next two seconds, in
// which it writes and flushes keys over the damaged table's three times
// (Pebble would pick compactions for them). Last, it reads the untouched
// keys. With fill, it first writes and flushes until the store refuses.
func compactChild(dir string, fill bool) int {
	stopped := make(chan struct{})
	s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20, Events: func(e pebblestore.Event) {
		if e.Kind == pebblestore.EventCompactionsStopped {
			emit(errReport("compactions-stopped", 0, e.Error))
			close(stopped) // a second event would panic: it is reported once
		}
	}})
	if err != nil {
		emit(errReport("open-error", 0, err))
		return 0
	}
	// begun counts the compactions that have begun: done, failed or
	// running.
	begun := func() (n, running int64) {
		m, err := s.PebbleMetrics()
		if err != nil {
			return -1, 0
		}
		return m.Compact.Count + m.Compact.FailedCount + m.Compact.NumInProgress, m.Compact.NumInProgress
	}
	if err := s.Compact(key(0), key(untouchedBase+untouched)); err != nil {
		emit(errReport("compact-error", 0, err))
	} else {
		emit(report{Event: "compact-ok"})
	}
	select {
	case <-stopped:
		n, running := begun()
		for ; running > 0; n, running = begun() {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Second) // a window in which nothing may begin: load cannot fail it
		for i := range 3 {
			b := s.NewBatch()
			for _, k := range seq(2+i, perTable, 2) {
				_ = b.Set(key(k), []byte("again"))
			}
			if err := b.Apply(false); err != nil {
				emit(errReport("write-error", 0, err))
			}
			_ = b.Close()
			if err := s.Flush(); err != nil {
				emit(errReport("flush-error", 0, err))
			}
		}
		time.Sleep(time.Second)
		after, _ := begun()
		emit(report{Event: "begun-after-stop", Key: int(after - n)})
	default:
	}
	if em, err := pebblestore.FiguresOf[level](s); err == nil && em.CompactionsStopped {
		emit(report{Event: "metrics-stopped"})
	}
	if fill {
		// Write and flush over the damaged table until the store refuses:
		// with no compaction, L0 deepens with every flush.
		for i := 0; i < 100; i++ {
			b := s.NewBatch()
			for _, k := range seq(2+i%2, perTable, 2) {
				_ = b.Set(key(k), []byte("again"))
			}
			err := b.Apply(false)
			_ = b.Close()
			if err == nil {
				err = s.Flush()
			}
			if err != nil {
				emit(errReport("fill-refused", i, err))
				break
			}
		}
	}
	for _, k := range seq(untouchedBase, untouched, 1) {
		if _, err := s.Get(key(k)); err != nil {
			emit(errReport("get-error", k, err))
		} else {
			emit(report{Event: "get-ok", Key: k})
		}
	}
	if err := s.Close(); err != nil {
		emit(errReport("close-error", 0, err))
	}
	emit(report{Event: "done"})
	return 0
}

// A flipped byte in each kind of block of a table that a compaction must
// rewrite. Compact returns, within a deadline, an error that matches
// ErrCorrupt and names the table, and the stop is reported once; no
// compaction begins afterwards, not even after flushes that would make
// Pebble pick one (Pebble used to retry the failed compaction in a loop,
// tens of thousands of jobs a minute, and Compact never returned); writes,
// flushes and reads of keys in other tables go on. The filter block is the
// exception: a compaction never reads it, so Compact succeeds and rewrites
// the table without the damage.
func TestCompactCorruptTable(t *testing.T) {
	for _, kind := range []string{"data", "index", "filter", "properties", "metaindex", "footer"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			bad := writeOverlapping(t, dir)
			at := blockOffset(t, bad, kind)
			flip(t, bad, func(int) int { return at })
			rs := runChildDeadline(t, "compact-corrupt", dir, 2*time.Minute)
			got := map[string][]report{}
			for _, r := range rs {
				got[r.Event] = append(got[r.Event], r)
			}
			require.Empty(t, got["open-error"], "a damaged table does not stop Open")
			for _, e := range []string{"write-error", "flush-error", "get-error", "close-error"} {
				require.Empty(t, got[e], e)
			}
			require.Len(t, got["get-ok"], untouched, "the keys of the other tables read")
			require.Equal(t, "done", rs[len(rs)-1].Event)
			if kind == "filter" {
				require.Len(t, got["compact-ok"], 1, "a compaction does not read filters: %v", got["compact-error"])
				require.Empty(t, got["compactions-stopped"])
				return
			}
			require.Len(t, got["compact-error"], 1, "Compact returns: %v", got["compact-ok"])
			ce := got["compact-error"][0]
			require.True(t, ce.Corrupt, "the error matches ErrCorrupt: %s", ce.Err)
			require.Contains(t, ce.Err, filepath.Base(bad), "the error names the table")
			require.Len(t, got["compactions-stopped"], 1)
			require.Contains(t, got["compactions-stopped"][0].Err, filepath.Base(bad))
			require.Len(t, got["begun-after-stop"], 1)
			require.Zero(t, got["begun-after-stop"][0].Key, "compactions begun after the stop")
			require.Len(t, got["metrics-stopped"], 1, "EngineMetrics.CompactionsStopped")
		})
	}
}

// With compactions stopped, every flush deepens L0, and Pebble stops
// writes for good once it holds L0StopWritesThreshold sublevels: a write
// or flush that met that stall would wait for ever. The store refuses
// writes and flushes first, with an error that matches ErrCorrupt and says
// why; reads go on, and Close returns.
func TestCompactCorruptTableFillsL0(t *testing.T) {
	dir := t.TempDir()
	bad := writeOverlapping(t, dir)
	flip(t, bad, func(int) int { return blockOffset(t, bad, "data") })
	rs := runChildDeadline(t, "compact-corrupt-fill", dir, 2*time.Minute)
	got := map[string][]report{}
	for _, r := range rs {
		got[r.Event] = append(got[r.Event], r)
	}
	require.Len(t, got["compactions-stopped"], 1)
	require.Len(t, got["fill-refused"], 1, "writes refused before L0 fills")
	r := got["fill-refused"][0]
	require.True(t, r.Corrupt, r.Err)
	require.Contains(t, r.Err, "writes refused")
	require.Contains(t, r.Err, filepath.Base(bad))
	require.Greater(t, r.Key, 3, "writes go on for a while first")
	for _, e := range []string{"get-error", "close-error"} {
		require.Empty(t, got[e], e)
	}
	require.Len(t, got["get-ok"], untouched)
	require.Equal(t, "done", rs[len(rs)-1].Event)
}
