package tipkv_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
)

func TestMetricsFromPebble(t *testing.T) {
	db, _ := testutil.OpenDir(t, nil)
	m, err := db.Metrics()
	require.NoError(t, err)
	require.Equal(t, "pebble", m.Engine)
	require.Len(t, m.Storage.Levels, 7)
	require.Empty(t, m.Queues)
	require.Empty(t, m.Collections)

	for i := range 100 {
		require.NoError(t, put(db, fmt.Sprintf("\x01key-%03d", i), "value"))
	}
	require.NoError(t, db.Flush())
	m, err = db.Metrics()
	require.NoError(t, err)
	s := m.Storage
	require.GreaterOrEqual(t, s.Flushes, int64(1))
	require.GreaterOrEqual(t, s.Tables(), int64(1))
	require.Greater(t, s.DiskUsage, uint64(0))
	require.Greater(t, s.WALBytesWritten, uint64(0))
	require.Greater(t, s.Uptime, time.Duration(0))
	for i, l := range s.Levels {
		require.Equal(t, i, l.Level)
	}

	_, err = get(t, db, "\x01key-007")
	require.NoError(t, err)
	m, err = db.Metrics()
	require.NoError(t, err)
	require.Greater(t, m.Storage.CacheHits+m.Storage.CacheMisses, int64(0), "a read from a table goes through the block cache")
	rate := m.Storage.CacheHitRate()
	require.True(t, rate >= 0 && rate <= 1, "hit rate %v", rate)
	require.NotEmpty(t, db.EngineReport(), "Pebble's own text stays reachable")

	require.NoError(t, db.Close())
	_, err = db.Metrics()
	require.ErrorIs(t, err, tipkv.ErrClosed)
	require.Empty(t, db.EngineReport())
}

func TestCacheHitRateOfNoReads(t *testing.T) {
	require.Zero(t, tipkv.StorageMetrics{}.CacheHitRate())
	require.Equal(t, 0.75, tipkv.StorageMetrics{CacheHits: 3, CacheMisses: 1}.CacheHitRate())
}

// Packages add their sections through the registry; Metrics sorts them.
func TestMetricsSectionsFromPackages(t *testing.T) {
	db := testutil.OpenMem(t)
	ln, err := link.Of(db)
	require.NoError(t, err)
	reg := &ln.Services
	type key struct{ name string }
	var enqueued uint64
	for _, name := range []string{"jobs", "emails"} {
		link.MetersOf[tipkv.Metrics](reg).Set(key{name}, func(mm *tipkv.Metrics) {
			mm.Queues = append(mm.Queues, tipkv.QueueMetrics{Name: name, Depth: 1, Enqueued: enqueued})
		})
	}
	link.MetersOf[tipkv.Metrics](reg).Set(key{"users"}, func(mm *tipkv.Metrics) {
		mm.Collections = append(mm.Collections, tipkv.CollectionMetrics{Name: "users", Writes: 3})
	})
	enqueued = 5
	m, err := db.Metrics()
	require.NoError(t, err)
	require.Equal(t, []tipkv.QueueMetrics{{Name: "emails", Depth: 1, Enqueued: 5}, {Name: "jobs", Depth: 1, Enqueued: 5}}, m.Queues)
	require.Equal(t, []tipkv.CollectionMetrics{{Name: "users", Writes: 3}}, m.Collections)

	// Set under the same key replaces; Delete removes.
	link.MetersOf[tipkv.Metrics](reg).Set(key{"jobs"}, func(*tipkv.Metrics) {})
	link.MetersOf[tipkv.Metrics](reg).Delete(key{"users"})
	m, err = db.Metrics()
	require.NoError(t, err)
	require.Len(t, m.Queues, 1)
	require.Empty(t, m.Collections)
}

// records is a slog handler that keeps what it is given.
type records struct {
	mu  sync.Mutex
	all []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// events returns the "event" attribute of each record at level.
func (r *records) events(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.all {
		if rec.Level != level {
			continue
		}
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "event" {
				out = append(out, a.Value.String())
			}
			return true
		})
	}
	return out
}

func TestLoggerHearsTheEngine(t *testing.T) {
	h := &records{}
	logger := slog.New(h)
	db, _ := testutil.OpenDir(t, &tipkv.Options{Logger: logger})
	ln, err := link.Of(db)
	require.NoError(t, err)
	require.Same(t, logger, ln.Logger, "packages log where the DB does")

	require.NoError(t, put(db, "\x01a", "1"))
	require.NoError(t, db.Flush()) // the flush event is emitted before Flush returns
	require.Contains(t, h.events(slog.LevelDebug), "flush")
	require.NoError(t, put(db, "\x01b", "2"))
	require.NoError(t, db.Compact())
	require.Contains(t, h.events(slog.LevelDebug), "compaction")
	require.Empty(t, h.events(slog.LevelError))
}

func TestNoLoggerDiscards(t *testing.T) {
	db := testutil.OpenMem(t)
	ln, err := link.Of(db)
	require.NoError(t, err)
	require.NotNil(t, ln.Logger)
	require.False(t, ln.Logger.Enabled(context.Background(), slog.LevelError))
}

// Metrics on an engine without figures (a shared engine) still carries
// the packages' sections.
func TestMetricsOnSharedEngine(t *testing.T) {
	db := testutil.OpenShared(t, 1, sharedstore.Options{}, nil)[0]
	m, err := db.Metrics()
	require.NoError(t, err)
	require.Equal(t, "shared", m.Engine)
	require.Zero(t, m.Storage.DiskUsage)
	err = db.Checkpoint(t.TempDir())
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorContains(t, err, "shared engine")
	require.False(t, errors.Is(err, tipkv.ErrClosed))
}

// BenchmarkMetrics measures DB.Metrics on a store with tables in several
// levels, with and without package sections.
func BenchmarkMetrics(b *testing.B) {
	for _, sections := range []int{0, 100} {
		b.Run(fmt.Sprintf("op=metrics,sections=%d", sections), func(b *testing.B) {
			db, _ := testutil.OpenDir(b, nil)
			for i := range 10_000 {
				require.NoError(b, put(db, fmt.Sprintf("\x01key-%06d", i), "value"))
				if i%2000 == 1999 {
					require.NoError(b, db.Flush())
				}
			}
			ln, err := link.Of(db)
			require.NoError(b, err)
			reg := &ln.Services
			for i := range sections {
				name := fmt.Sprintf("queue-%03d", sections-i)
				link.MetersOf[tipkv.Metrics](reg).Set(name, func(mm *tipkv.Metrics) {
					mm.Queues = append(mm.Queues, tipkv.QueueMetrics{Name: name})
				})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				m, err := db.Metrics()
				if err != nil || len(m.Queues) != sections || m.Storage.Tables() == 0 {
					b.Fatalf("metrics: %v, %d queues", err, len(m.Queues))
				}
			}
		})
	}
	b.Run("op=engine-report", func(b *testing.B) {
		db, _ := testutil.OpenDir(b, nil)
		require.NoError(b, put(db, "\x01a", "1"))
		require.NoError(b, db.Flush())
		b.ReportAllocs()
		for b.Loop() {
			if db.EngineReport() == "" {
				b.Fatal("no report")
			}
		}
	})
}
