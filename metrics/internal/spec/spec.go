// Package spec lists the metrics both exporters publish, once: their
// names, units, help, kind and where each value comes from in
// tipkv.Metrics, so that Prometheus and OpenTelemetry cannot drift apart.
package spec

import (
	"strconv"

	"github.com/tipkv/tipkv"
)

// Kind is how a figure behaves over time.
type Kind int

const (
	Gauge   Kind = iota // the state now
	Counter             // counts up from the DB's Open
)

// Unit of a figure, as OpenTelemetry spells it (UCUM); Prometheus puts it
// in the name.
const (
	Bytes   = "By"
	Seconds = "s"
	None    = "1"
)

// Metric is one published figure. Exactly one of the value functions is
// set; it says which section of tipkv.Metrics the figure comes from and so
// which label it carries (Label).
type Metric struct {
	// Name is the OpenTelemetry name ("tipkv.cache.hits"); Prom the
	// Prometheus name ("tipkv_cache_hits_total").
	Name, Prom string
	Help       string
	Unit       string
	Kind       Kind

	Store      func(tipkv.StorageMetrics) float64
	Level      func(tipkv.LevelMetrics) float64
	Queue      func(tipkv.QueueMetrics) float64
	Collection func(tipkv.CollectionMetrics) float64
	// FeedRetention is a figure of the retention of the streams under one
	// prefix (a feed), labelled by the prefix.
	FeedRetention func(tipkv.FeedRetentionMetrics) float64
	// DB is a store-wide figure of tipkv's own (feeds, retention), which
	// every engine has.
	DB func(*tipkv.Metrics) float64
}

// Label is the name of the label (attribute) that tells the figure's
// entries apart: "level", "queue", "collection", "streams" (the prefix of
// the stream names a feed retention bounds), or "" for a store-wide
// figure. (Per feed stream there are no figures: a feed may hold millions
// of streams; tipkv.Metrics.Feeds has their total.)
func (m Metric) Label() string {
	switch {
	case m.Level != nil:
		return "level"
	case m.Queue != nil:
		return "queue"
	case m.Collection != nil:
		return "collection"
	case m.FeedRetention != nil:
		return "streams"
	}
	return ""
}

// Point is one value of a metric: its label value ("" for a store-wide
// figure) and the value.
type Point struct {
	Label string
	Value float64
}

// Points returns the metric's values in m.
func (x Metric) Points(m *tipkv.Metrics) []Point {
	switch {
	case x.Store != nil:
		if m.Storage.Levels == nil {
			return nil // an engine without figures (etcd, SQL)
		}
		return []Point{{Value: x.Store(m.Storage)}}
	case x.Level != nil:
		out := make([]Point, 0, len(m.Storage.Levels))
		for _, l := range m.Storage.Levels {
			out = append(out, Point{strconv.Itoa(l.Level), x.Level(l)})
		}
		return out
	case x.Queue != nil:
		out := make([]Point, 0, len(m.Queues))
		for _, q := range m.Queues {
			if x.Kind == Gauge && !q.Gauges {
				continue // a shared engine's queue: only Stats knows them
			}
			out = append(out, Point{q.Name, x.Queue(q)})
		}
		return out
	case x.Collection != nil:
		out := make([]Point, 0, len(m.Collections))
		for _, c := range m.Collections {
			out = append(out, Point{c.Name, x.Collection(c)})
		}
		return out
	case x.FeedRetention != nil:
		out := make([]Point, 0, len(m.Feeds.Retentions))
		for _, r := range m.Feeds.Retentions {
			out = append(out, Point{r.Streams, x.FeedRetention(r)})
		}
		return out
	case x.DB != nil:
		return []Point{{Value: x.DB(m)}}
	}
	return nil
}

type sm = tipkv.StorageMetrics

func f[T int | int64 | uint64](v T) float64 { return float64(v) }

// All are the published metrics.
var All = []Metric{
	// Disk and caches.
	{Name: "tipkv.disk.usage", Prom: "tipkv_disk_usage_bytes", Unit: Bytes, Kind: Gauge,
		Help:  "Bytes the files in the store's directory take on disk, as du counts them: tables, write-ahead log with its preallocated space, manifest, obsolete files not deleted yet.",
		Store: func(s sm) float64 { return f(s.DiskUsage) }},
	{Name: "tipkv.cache.size", Prom: "tipkv_cache_size_bytes", Unit: Bytes, Kind: Gauge,
		Help:  "Bytes in the block cache (shared with the memtables).",
		Store: func(s sm) float64 { return f(s.CacheBytes) }},
	{Name: "tipkv.cache.hits", Prom: "tipkv_cache_hits_total", Unit: None, Kind: Counter,
		Help:  "Block reads served by the block cache.",
		Store: func(s sm) float64 { return f(s.CacheHits) }},
	{Name: "tipkv.cache.misses", Prom: "tipkv_cache_misses_total", Unit: None, Kind: Counter,
		Help:  "Block reads that missed the block cache and read the disk.",
		Store: func(s sm) float64 { return f(s.CacheMisses) }},
	{Name: "tipkv.filter.hits", Prom: "tipkv_filter_hits_total", Unit: None, Kind: Counter,
		Help:  "Lookups of a missing key that a bloom filter answered without a block read.",
		Store: func(s sm) float64 { return f(s.FilterHits) }},
	{Name: "tipkv.filter.misses", Prom: "tipkv_filter_misses_total", Unit: None, Kind: Counter,
		Help:  "Lookups a bloom filter let through.",
		Store: func(s sm) float64 { return f(s.FilterMisses) }},

	// Memtables and the write-ahead log.
	{Name: "tipkv.memtable.count", Prom: "tipkv_memtables", Unit: None, Kind: Gauge,
		Help:  "Memtables: the newest writes, before a flush.",
		Store: func(s sm) float64 { return f(s.MemTables) }},
	{Name: "tipkv.memtable.size", Prom: "tipkv_memtable_size_bytes", Unit: Bytes, Kind: Gauge,
		Help:  "Bytes allocated by the memtables.",
		Store: func(s sm) float64 { return f(s.MemTableBytes) }},
	{Name: "tipkv.wal.files", Prom: "tipkv_wal_files", Unit: None, Kind: Gauge,
		Help:  "Live write-ahead log files.",
		Store: func(s sm) float64 { return f(s.WALFiles) }},
	{Name: "tipkv.wal.size", Prom: "tipkv_wal_size_bytes", Unit: Bytes, Kind: Gauge,
		Help:  "Live data in the write-ahead log: writes not yet flushed to tables.",
		Store: func(s sm) float64 { return f(s.WALBytes) }},
	{Name: "tipkv.wal.physical_size", Prom: "tipkv_wal_physical_size_bytes", Unit: Bytes, Kind: Gauge,
		Help:  "Bytes the write-ahead log's files take on disk: live, kept for recycling, and their preallocated space.",
		Store: func(s sm) float64 { return f(s.WALPhysicalSize) }},
	{Name: "tipkv.wal.written", Prom: "tipkv_wal_written_bytes_total", Unit: Bytes, Kind: Counter,
		Help:  "Bytes written to the write-ahead log.",
		Store: func(s sm) float64 { return f(s.WALBytesWritten) }},

	// The LSM tree.
	{Name: "tipkv.lsm.tables", Prom: "tipkv_lsm_tables", Unit: None, Kind: Gauge,
		Help:  "Tables in a level of the LSM tree.",
		Level: func(l tipkv.LevelMetrics) float64 { return f(l.Tables) }},
	{Name: "tipkv.lsm.size", Prom: "tipkv_lsm_size_bytes", Unit: Bytes, Kind: Gauge,
		Help:  "Bytes of the tables in a level of the LSM tree.",
		Level: func(l tipkv.LevelMetrics) float64 { return f(l.Bytes) }},
	{Name: "tipkv.lsm.score", Prom: "tipkv_lsm_compaction_score", Unit: None, Kind: Gauge,
		Help:  "Compaction score of a level: at 1 or more it is due for compaction.",
		Level: func(l tipkv.LevelMetrics) float64 { return l.Score }},
	{Name: "tipkv.lsm.read_amplification", Prom: "tipkv_lsm_read_amplification", Unit: None, Kind: Gauge,
		Help:  "Tables a read may consult: L0 sublevels plus the other non-empty levels.",
		Store: func(s sm) float64 { return f(s.ReadAmp) }},
	{Name: "tipkv.lsm.tombstones", Prom: "tipkv_lsm_tombstones", Unit: None, Kind: Gauge,
		Help:  "Estimated deletions (point and range) still in the tables.",
		Store: func(s sm) float64 { return f(s.Tombstones) }},
	{Name: "tipkv.compaction.debt", Prom: "tipkv_compaction_debt_bytes", Unit: Bytes, Kind: Gauge,
		Help:  "Estimated bytes compactions must rewrite for the tree to reach its target shape.",
		Store: func(s sm) float64 { return f(s.CompactionDebt) }},
	{Name: "tipkv.compaction.running", Prom: "tipkv_compactions_running", Unit: None, Kind: Gauge,
		Help:  "Compactions in progress.",
		Store: func(s sm) float64 { return f(s.CompactionsRunning) }},
	{Name: "tipkv.obsolete_tables.size", Prom: "tipkv_obsolete_tables_size_bytes", Unit: Bytes, Kind: Gauge,
		Help:  "Tables no longer needed and not deleted yet.",
		Store: func(s sm) float64 { return f(s.ObsoleteTableBytes) }},
	{Name: "tipkv.snapshots", Prom: "tipkv_snapshots", Unit: None, Kind: Gauge,
		Help:  "Snapshots open: an old one keeps deleted data from being dropped.",
		Store: func(s sm) float64 { return f(s.OpenSnapshots) }},
	{Name: "tipkv.table_iterators", Prom: "tipkv_table_iterators", Unit: None, Kind: Gauge,
		Help:  "Table iterators open: a figure that only grows is an iteration never closed.",
		Store: func(s sm) float64 { return f(s.TableIterators) }},

	// Background work and trouble.
	{Name: "tipkv.flushes", Prom: "tipkv_flushes_total", Unit: None, Kind: Counter,
		Help:  "Memtable flushes.",
		Store: func(s sm) float64 { return f(s.Flushes) }},
	{Name: "tipkv.compactions", Prom: "tipkv_compactions_total", Unit: None, Kind: Counter,
		Help:  "Compactions.",
		Store: func(s sm) float64 { return f(s.Compactions) }},
	{Name: "tipkv.compactions.failed", Prom: "tipkv_compactions_failed_total", Unit: None, Kind: Counter,
		Help:  "Compactions that failed.",
		Store: func(s sm) float64 { return f(s.CompactionsFailed) }},
	{Name: "tipkv.compaction.time", Prom: "tipkv_compaction_seconds_total", Unit: Seconds, Kind: Counter,
		Help:  "Time compactions took.",
		Store: func(s sm) float64 { return s.CompactionTime.Seconds() }},
	{Name: "tipkv.write_stalls", Prom: "tipkv_write_stalls_total", Unit: None, Kind: Counter,
		Help:  "Times writes were stopped until memtables flushed or L0 compacted.",
		Store: func(s sm) float64 { return f(s.WriteStalls) }},
	{Name: "tipkv.write_stall.time", Prom: "tipkv_write_stall_seconds_total", Unit: Seconds, Kind: Counter,
		Help:  "Time writes were stopped by write stalls.",
		Store: func(s sm) float64 { return s.WriteStallTime.Seconds() }},
	{Name: "tipkv.disk_slow", Prom: "tipkv_disk_slow_total", Unit: None, Kind: Counter,
		Help:  "Disk writes and syncs slower than the engine's threshold.",
		Store: func(s sm) float64 { return f(s.DiskSlow) }},
	{Name: "tipkv.background_errors", Prom: "tipkv_background_errors_total", Unit: None, Kind: Counter,
		Help:  "Flushes and compactions that failed (the engine retries them).",
		Store: func(s sm) float64 { return f(s.BackgroundErrors) }},
	{Name: "tipkv.errors", Prom: "tipkv_engine_errors_total", Unit: None, Kind: Counter,
		Help:  "Other errors the engine logged.",
		Store: func(s sm) float64 { return f(s.Errors) }},
	{Name: "tipkv.corruptions", Prom: "tipkv_corruptions_total", Unit: None, Kind: Counter,
		Help:  "Files found corrupt.",
		Store: func(s sm) float64 { return f(s.Corruptions) }},
	{Name: "tipkv.compactions.stopped", Prom: "tipkv_compactions_stopped", Unit: None, Kind: Gauge,
		Help: "1 once a compaction met a corrupt table: no compaction runs until the store is reopened.",
		Store: func(s sm) float64 {
			if s.CompactionsStopped {
				return 1
			}
			return 0
		}},

	// Queues.
	{Name: "tipkv.queue.depth", Prom: "tipkv_queue_depth", Unit: None, Kind: Gauge,
		Help:  "Messages in a queue: ready, leased and delayed (dead letters apart).",
		Queue: func(q tipkv.QueueMetrics) float64 { return f(q.Depth) }},
	{Name: "tipkv.queue.leased", Prom: "tipkv_queue_leased", Unit: None, Kind: Gauge,
		Help:  "Messages of a queue leased to a consumer now.",
		Queue: func(q tipkv.QueueMetrics) float64 { return f(q.Leased) }},
	{Name: "tipkv.queue.delayed", Prom: "tipkv_queue_delayed", Unit: None, Kind: Gauge,
		Help:  "Messages of a queue not visible before their time.",
		Queue: func(q tipkv.QueueMetrics) float64 { return f(q.Delayed) }},
	{Name: "tipkv.queue.dead_letters", Prom: "tipkv_queue_dead_letters", Unit: None, Kind: Gauge,
		Help:  "Dead letters of a queue.",
		Queue: func(q tipkv.QueueMetrics) float64 { return f(q.DeadLetters) }},
	{Name: "tipkv.queue.enqueued", Prom: "tipkv_queue_enqueued_total", Unit: None, Kind: Counter,
		Help:  "Messages enqueued.",
		Queue: func(q tipkv.QueueMetrics) float64 { return f(q.Enqueued) }},
	{Name: "tipkv.queue.deliveries", Prom: "tipkv_queue_deliveries_total", Unit: None, Kind: Counter,
		Help:  "Messages delivered by Receive, every delivery counted.",
		Queue: func(q tipkv.QueueMetrics) float64 { return f(q.Deliveries) }},
	{Name: "tipkv.queue.redeliveries", Prom: "tipkv_queue_redeliveries_total", Unit: None, Kind: Counter,
		Help:  "Deliveries after the first: a lease ended or was released.",
		Queue: func(q tipkv.QueueMetrics) float64 { return f(q.Redeliveries) }},
	{Name: "tipkv.queue.acks", Prom: "tipkv_queue_acks_total", Unit: None, Kind: Counter,
		Help:  "Messages acknowledged.",
		Queue: func(q tipkv.QueueMetrics) float64 { return f(q.Acks) }},
	{Name: "tipkv.queue.dead_lettered", Prom: "tipkv_queue_dead_lettered_total", Unit: None, Kind: Counter,
		Help:  "Messages moved to the dead letters.",
		Queue: func(q tipkv.QueueMetrics) float64 { return f(q.DeadLettered) }},

	// Collections and feeds.
	{Name: "tipkv.collection.writes", Prom: "tipkv_collection_writes_total", Unit: None, Kind: Counter,
		Help:       "Versions written to a collection (puts and delete markers).",
		Collection: func(c tipkv.CollectionMetrics) float64 { return f(c.Writes) }},
	{Name: "tipkv.collection.removed", Prom: "tipkv_collection_removed_total", Unit: None, Kind: Counter,
		Help:       "Versions removed from a collection (pruned, purged, retention).",
		Collection: func(c tipkv.CollectionMetrics) float64 { return f(c.Removed) }},
	{Name: "tipkv.feed.appends", Prom: "tipkv_feed_appends_total", Unit: None, Kind: Counter,
		Help: "Events appended to the DB's feeds by this process.",
		DB:   func(m *tipkv.Metrics) float64 { return f(m.Feeds.Appends) }},
	{Name: "tipkv.feed.stale_groups", Prom: "tipkv_feed_stale_groups", Unit: None, Kind: Gauge,
		Help:          "Consumer groups the latest retention pass of the streams under a prefix found holding its trim back with an event unhandled past FeedRetention.StaleGroups.",
		FeedRetention: func(r tipkv.FeedRetentionMetrics) float64 { return f(r.StaleGroups) }},

	// Retention passes.
	{Name: "tipkv.retention.feed_passes", Prom: "tipkv_retention_feed_passes_total", Unit: None, Kind: Counter,
		Help: "Feed retention passes (Feed.Retain, background or called).",
		DB:   func(m *tipkv.Metrics) float64 { return f(m.Retention.FeedPasses) }},
	{Name: "tipkv.retention.feed_failures", Prom: "tipkv_retention_feed_failures_total", Unit: None, Kind: Counter,
		Help: "Feed retention passes that failed.",
		DB:   func(m *tipkv.Metrics) float64 { return f(m.Retention.FeedFailures) }},
	{Name: "tipkv.retention.streams_trimmed", Prom: "tipkv_retention_streams_trimmed_total", Unit: None, Kind: Counter,
		Help: "Streams a feed retention pass dropped events from.",
		DB:   func(m *tipkv.Metrics) float64 { return f(m.Retention.StreamsTrimmed) }},
	{Name: "tipkv.retention.purge_passes", Prom: "tipkv_retention_purge_passes_total", Unit: None, Kind: Counter,
		Help: "Passes purging expired documents (Collection.PurgeExpired).",
		DB:   func(m *tipkv.Metrics) float64 { return f(m.Retention.PurgePasses) }},
	{Name: "tipkv.retention.purge_failures", Prom: "tipkv_retention_purge_failures_total", Unit: None, Kind: Counter,
		Help: "Passes purging expired documents that failed.",
		DB:   func(m *tipkv.Metrics) float64 { return f(m.Retention.PurgeFailures) }},
	{Name: "tipkv.retention.documents_purged", Prom: "tipkv_retention_documents_purged_total", Unit: None, Kind: Counter,
		Help: "Expired documents purged.",
		DB:   func(m *tipkv.Metrics) float64 { return f(m.Retention.DocumentsPurged) }},
	{Name: "tipkv.retention.groups_dropped", Prom: "tipkv_retention_groups_dropped_total", Unit: None, Kind: Counter,
		Help: "Stale consumer groups a feed retention pass dropped (FeedRetention.DropStaleGroups).",
		DB:   func(m *tipkv.Metrics) float64 { return f(m.Retention.GroupsDropped) }},
}
