// Package tipkvotel exports a tipkv DB's figures (tipkv.DB.Metrics) to
// OpenTelemetry, as asynchronous instruments on a metric.MeterProvider.
//
//	reg, err := tipkvotel.Register(db, provider, attribute.String("store", "orders"))
//	...
//	defer reg.Unregister() // before db.Close
//
// Each collection calls DB.Metrics once, in one callback that observes
// every instrument. Gauges are the state now; counters (monotonic) count
// from the DB's Open. Per-level, per-queue, per-collection and per feed
// retention figures carry the attribute "level", "queue", "collection"
// or "streams".
package tipkvotel

import (
	"context"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/metrics/internal/spec"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of the meter Register uses.
const ScopeName = "github.com/tipkv/tipkv/metrics/tipkvotel"

// Register creates tipkv's instruments on the meter ScopeName of mp (nil:
// the global MeterProvider, otel.GetMeterProvider) and a callback that
// observes them from db.Metrics at every collection, with attrs on every
// observation (a store's name, to tell several DBs apart). Unregister the
// result to stop observing, before closing db: a callback on a closed DB
// fails with tipkv.ErrClosed, which the SDK reports.
func Register(db *tipkv.DB, mp metric.MeterProvider, attrs ...attribute.KeyValue) (metric.Registration, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	gauges := make([]metric.Float64ObservableGauge, len(spec.All))
	counters := make([]metric.Float64ObservableCounter, len(spec.All))
	var all []metric.Observable
	for i, m := range spec.All {
		var err error
		switch m.Kind {
		case spec.Counter:
			counters[i], err = meter.Float64ObservableCounter(m.Name, metric.WithDescription(m.Help), metric.WithUnit(m.Unit))
			all = append(all, counters[i])
		default:
			gauges[i], err = meter.Float64ObservableGauge(m.Name, metric.WithDescription(m.Help), metric.WithUnit(m.Unit))
			all = append(all, gauges[i])
		}
		if err != nil {
			return nil, err
		}
	}
	base := attribute.NewSet(attrs...)
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		m, err := db.Metrics()
		if err != nil {
			return err
		}
		for i, x := range spec.All {
			label := x.Label()
			for _, p := range x.Points(&m) {
				set := base
				if label != "" {
					set = attribute.NewSet(append(base.ToSlice(), attribute.String(label, p.Label))...)
				}
				if x.Kind == spec.Counter {
					o.ObserveFloat64(counters[i], p.Value, metric.WithAttributeSet(set))
				} else {
					o.ObserveFloat64(gauges[i], p.Value, metric.WithAttributeSet(set))
				}
			}
		}
		return nil
	}, all...)
}
