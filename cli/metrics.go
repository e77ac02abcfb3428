package cli

import (
	"fmt"
	"io"

	"github.com/tipkv/tipkv"
)

// metricsJSON renders DB.Metrics for --json: the same figures, in
// snake_case, durations in seconds.
func metricsJSON(m tipkv.Metrics) object {
	s := m.Storage
	levels := []any{}
	for _, l := range s.Levels {
		levels = append(levels, object{{"level", l.Level}, {"sublevels", l.Sublevels}, {"tables", l.Tables}, {"bytes", l.Bytes}, {"score", l.Score}})
	}
	storage := object{
		{"disk_usage", s.DiskUsage},
		{"cache_bytes", s.CacheBytes}, {"cache_blocks", s.CacheBlocks},
		{"cache_hits", s.CacheHits}, {"cache_misses", s.CacheMisses}, {"cache_hit_rate", s.CacheHitRate()},
		{"filter_hits", s.FilterHits}, {"filter_misses", s.FilterMisses},
		{"memtables", s.MemTables}, {"memtable_bytes", s.MemTableBytes},
		{"wal_files", s.WALFiles}, {"wal_bytes", s.WALBytes}, {"wal_physical_size", s.WALPhysicalSize}, {"wal_bytes_written", s.WALBytesWritten},
		{"tables", s.Tables()}, {"levels", levels}, {"read_amp", s.ReadAmp},
		{"tombstones", s.Tombstones}, {"compaction_debt", s.CompactionDebt},
		{"compactions_running", s.CompactionsRunning}, {"flushes_running", s.FlushesRunning},
		{"flushes", s.Flushes}, {"compactions", s.Compactions}, {"compactions_failed", s.CompactionsFailed},
		{"compaction_seconds", s.CompactionTime.Seconds()},
		{"write_stalls", s.WriteStalls}, {"write_stall_seconds", s.WriteStallTime.Seconds()},
		{"disk_slow", s.DiskSlow}, {"background_errors", s.BackgroundErrors}, {"errors", s.Errors}, {"corruptions", s.Corruptions}, {"compactions_stopped", s.CompactionsStopped},
		{"obsolete_table_bytes", s.ObsoleteTableBytes},
		{"open_snapshots", s.OpenSnapshots}, {"table_iterators", s.TableIterators},
		{"uptime_seconds", s.Uptime.Seconds()},
	}
	queues := []any{}
	for _, q := range m.Queues {
		queues = append(queues, object{
			{"queue", segmentJSON([]byte(q.Name))}, {"depth", q.Depth}, {"leased", q.Leased}, {"delayed", q.Delayed}, {"dead_letters", q.DeadLetters},
			{"enqueued", q.Enqueued}, {"deliveries", q.Deliveries}, {"redeliveries", q.Redeliveries}, {"acks", q.Acks}, {"dead_lettered", q.DeadLettered},
		})
	}
	colls := []any{}
	for _, c := range m.Collections {
		colls = append(colls, object{{"collection", segmentJSON([]byte(c.Name))}, {"writes", c.Writes}, {"removed", c.Removed}})
	}
	r := m.Retention
	retention := object{
		{"feed_passes", r.FeedPasses}, {"feed_failures", r.FeedFailures}, {"streams_trimmed", r.StreamsTrimmed},
		{"purge_passes", r.PurgePasses}, {"purge_failures", r.PurgeFailures}, {"documents_purged", r.DocumentsPurged},
	}
	return object{{"engine", m.Engine}, {"storage", storage}, {"queues", queues}, {"collections", colls},
		{"feeds", object{{"appends", m.Feeds.Appends}}}, {"retention", retention}}
}

// printMetrics writes the engine's figures that describe the store and
// that the LSM table does not show. The counters (flushes, compactions,
// stalls, cache hits) count from this command's own open: only --json
// has them.
func printMetrics(w io.Writer, m tipkv.Metrics) error {
	s := m.Storage
	fmt.Fprintf(w, "\nENGINE %s\n", m.Engine)
	t := newTable(w)
	t.row("compaction debt", size(s.CompactionDebt)+" to rewrite before the tree has its target shape")
	t.row("tombstones", fmt.Sprintf("about %d in tables (Pebble's estimate), not yet dropped by compactions", s.Tombstones))
	t.row("obsolete tables", size(s.ObsoleteTableBytes)+" not deleted yet")
	t.row("WAL on disk", size(s.WALPhysicalSize))
	return t.flush()
}
