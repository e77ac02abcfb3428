package tipkvprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/metrics/internal/fixture"
	"github.com/tipkv/tipkv/metrics/internal/spec"
	"github.com/tipkv/tipkv/metrics/tipkvprom"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/tipkvtest"
	"github.com/tipkv/tipkv/versioned"
)

func gauge(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1, name)
			m := mf.GetMetric()[0]
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			default:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestCollector(t *testing.T) {
	db := fixture.Open(t)
	fixture.Write(t, db, 100)
	require.NoError(t, db.Flush())
	fixture.Queues(t, db)

	// A pedantic registry checks that what Collect sends matches Describe.
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(tipkvprom.NewCollector(db)))
	require.GreaterOrEqual(t, gauge(t, reg, "tipkv_flushes_total"), 1.0)
	require.Greater(t, gauge(t, reg, "tipkv_disk_usage_bytes"), 0.0)
	require.Greater(t, gauge(t, reg, "tipkv_wal_written_bytes_total"), 0.0)

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tipkv_queue_depth Messages in a queue: ready, leased and delayed (dead letters apart).
# TYPE tipkv_queue_depth gauge
tipkv_queue_depth{queue="emails"} 1
tipkv_queue_depth{queue="jobs"} 9
# HELP tipkv_queue_acks_total Messages acknowledged.
# TYPE tipkv_queue_acks_total counter
tipkv_queue_acks_total{queue="emails"} 0
tipkv_queue_acks_total{queue="jobs"} 40
# HELP tipkv_queue_dead_letters Dead letters of a queue.
# TYPE tipkv_queue_dead_letters gauge
tipkv_queue_dead_letters{queue="emails"} 3
tipkv_queue_dead_letters{queue="jobs"} 0
# HELP tipkv_collection_writes_total Versions written to a collection (puts and delete markers).
# TYPE tipkv_collection_writes_total counter
tipkv_collection_writes_total{collection="users"} 100
`), "tipkv_queue_depth", "tipkv_queue_acks_total", "tipkv_queue_dead_letters", "tipkv_collection_writes_total"))

	// One series per level.
	n, err := testutil.GatherAndCount(reg, "tipkv_lsm_tables")
	require.NoError(t, err)
	require.Equal(t, 7, n)
}

// Every published metric is emitted by a store that uses tipkv's packages
// (a queue, a collection, a feed), filled by the packages themselves: a
// metric in the list that nothing fills (as tipkv_stream_appends_total
// was: documented, never emitted) fails here.
func TestEveryMetricIsEmitted(t *testing.T) {
	db := fixture.Open(t)
	q, err := queue.Open[string](db, "jobs", nil)
	require.NoError(t, err)
	_, err = q.Enqueue(db, "a", "b")
	require.NoError(t, err)
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, q.Ack(db, ms[0].ID))
	users, err := versioned.NewCollection[string](db, "users", nil)
	require.NoError(t, err)
	_, err = users.Put(db, "alice", "v1")
	require.NoError(t, err)
	feed, err := versioned.NewFeed[string](db, &versioned.FeedOptions[string]{
		Retention: versioned.FeedRetention{Streams: "audit", MaxEvents: 10, Interval: -1}})
	require.NoError(t, err)
	_, err = feed.Append(db, "audit", "e1")
	require.NoError(t, err)
	_, err = feed.Retain(context.Background()) // the retention's figures
	require.NoError(t, err)
	require.NoError(t, db.Flush())

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(tipkvprom.NewCollector(db)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	emitted := map[string]int{}
	for _, mf := range mfs {
		emitted[mf.GetName()] = len(mf.GetMetric())
	}
	for _, m := range spec.All {
		require.Positive(t, emitted[m.Prom], "%s is published but not emitted", m.Prom)
	}
	require.Len(t, emitted, len(spec.All), "nothing emitted beyond the list")
	require.Equal(t, 1.0, gauge(t, reg, "tipkv_feed_appends_total"))
}

// The metric names and help follow Prometheus' conventions.
func TestCollectorLint(t *testing.T) {
	db := fixture.Open(t)
	fixture.Queues(t, db)
	problems, err := testutil.CollectAndLint(tipkvprom.NewCollector(db))
	require.NoError(t, err)
	require.Empty(t, problems)
}

// Several DBs in one registry, each under a label of its own.
func TestCollectorPerStore(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for _, name := range []string{"orders", "events"} {
		db := fixture.Open(t)
		prometheus.WrapRegistererWith(prometheus.Labels{"store": name}, reg).MustRegister(tipkvprom.NewCollector(db))
	}
	n, err := testutil.GatherAndCount(reg, "tipkv_disk_usage_bytes")
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

func TestCollectorClosedDB(t *testing.T) {
	db := fixture.Open(t)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(tipkvprom.NewCollector(db)))
	require.NoError(t, db.Close())
	_, err := reg.Gather()
	require.ErrorIs(t, err, tipkv.ErrClosed)
}

// A shared engine has no engine figures: only the packages' sections,
// and of the queues' only the counters: their gauges are known to the
// store alone (Stats reads them), and a 0 would say a queue with dead
// letters has none.
func TestCollectorWithoutEngineFigures(t *testing.T) {
	db := tipkvtest.OpenShared(t, 1, nil)[0]
	fixture.Queues(t, db)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(tipkvprom.NewCollector(db)))
	n, err := testutil.GatherAndCount(reg, "tipkv_queue_enqueued_total")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = testutil.GatherAndCount(reg, "tipkv_queue_depth", "tipkv_queue_dead_letters")
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = testutil.GatherAndCount(reg, "tipkv_disk_usage_bytes", "tipkv_lsm_tables")
	require.NoError(t, err)
	require.Zero(t, n)
}
