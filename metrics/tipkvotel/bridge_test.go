package tipkvotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/metrics/internal/fixture"
	"github.com/tipkv/tipkv/metrics/tipkvotel"
	"github.com/tipkv/tipkv/tipkvtest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, tipkvotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// points returns the metric's points by the value of attribute key ("" for
// a store-wide figure), and checks that every point carries want.
func points(t *testing.T, m metricdata.Metrics, key string, want attribute.KeyValue) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	var dps []metricdata.DataPoint[float64]
	switch d := m.Data.(type) {
	case metricdata.Gauge[float64]:
		dps = d.DataPoints
	case metricdata.Sum[float64]:
		require.True(t, d.IsMonotonic, "%s: counters are monotonic", m.Name)
		require.Equal(t, metricdata.CumulativeTemporality, d.Temporality)
		dps = d.DataPoints
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	for _, dp := range dps {
		v, ok := dp.Attributes.Value(want.Key)
		require.True(t, ok && v == want.Value, "%s: every point has %v", m.Name, want)
		label, _ := dp.Attributes.Value(attribute.Key(key))
		out[label.AsString()] = dp.Value
	}
	return out
}

func TestBridge(t *testing.T) {
	db := fixture.Open(t)
	fixture.Write(t, db, 100)
	require.NoError(t, db.Flush())
	fixture.Queues(t, db)

	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	store := attribute.String("store", "orders")
	reg, err := tipkvotel.Register(db, provider, store)
	require.NoError(t, err)

	got := collect(t, reader)
	require.GreaterOrEqual(t, points(t, got["tipkv.flushes"], "", store)[""], 1.0)
	require.Greater(t, points(t, got["tipkv.disk.usage"], "", store)[""], 0.0)
	require.Equal(t, "By", got["tipkv.disk.usage"].Unit)
	require.Len(t, points(t, got["tipkv.lsm.tables"], "level", store), 7)
	require.Equal(t, map[string]float64{"jobs": 9, "emails": 1}, points(t, got["tipkv.queue.depth"], "queue", store))
	require.Equal(t, map[string]float64{"jobs": 40, "emails": 0}, points(t, got["tipkv.queue.acks"], "queue", store))
	require.Equal(t, map[string]float64{"users": 100}, points(t, got["tipkv.collection.writes"], "collection", store))

	// Unregistered: nothing is observed any more, and closing the DB is
	// safe.
	require.NoError(t, reg.Unregister())
	require.NoError(t, db.Close())
	require.Empty(t, collect(t, reader))
}

func TestBridgeClosedDB(t *testing.T) {
	db := fixture.Open(t)
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	_, err := tipkvotel.Register(db, provider)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	var rm metricdata.ResourceMetrics
	require.ErrorIs(t, reader.Collect(context.Background(), &rm), tipkv.ErrClosed)
}

// A shared engine has no engine figures: only the packages' sections,
// and of the queues' only the counters (their gauges only the store
// knows).
func TestBridgeWithoutEngineFigures(t *testing.T) {
	db := tipkvtest.OpenShared(t, 1, nil)[0]
	fixture.Queues(t, db)
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	_, err := tipkvotel.Register(db, provider)
	require.NoError(t, err)
	got := collect(t, reader)
	require.Contains(t, got, "tipkv.queue.enqueued")
	require.NotContains(t, got, "tipkv.queue.depth")
	require.NotContains(t, got, "tipkv.queue.dead_letters")
	require.NotContains(t, got, "tipkv.disk.usage")
}
