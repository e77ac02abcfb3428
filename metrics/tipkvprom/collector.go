// Package tipkvprom exports a tipkv DB's figures (tipkv.DB.Metrics) to
// Prometheus.
//
//	reg.MustRegister(tipkvprom.NewCollector(db))
//
// Each scrape calls DB.Metrics once. Gauges are the state now; counters
// (names ending in _total) count from the DB's Open. For several DBs in one
// process, register each under a label of its own:
//
//	prometheus.WrapRegistererWith(prometheus.Labels{"store": "orders"}, reg).
//		MustRegister(tipkvprom.NewCollector(orders))
package tipkvprom

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/metrics/internal/spec"
)

// Collector is a prometheus.Collector of one DB's figures. It is safe for
// concurrent use.
type Collector struct {
	db    *tipkv.DB
	descs []*prometheus.Desc // per spec.All
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector of db's figures.
func NewCollector(db *tipkv.DB) *Collector {
	c := &Collector{db: db}
	for _, m := range spec.All {
		var labels []string
		if l := m.Label(); l != "" {
			labels = []string{l}
		}
		c.descs = append(c.descs, prometheus.NewDesc(m.Prom, m.Help, labels, nil))
	}
	return c
}

// Describe implements prometheus.Collector: every metric, whether or not
// the DB has figures for it yet.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. If DB.Metrics fails (the DB is
// closed), the scrape reports the error.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m, err := c.db.Metrics()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.descs[0], err)
		return
	}
	for i, x := range spec.All {
		typ := prometheus.GaugeValue
		if x.Kind == spec.Counter {
			typ = prometheus.CounterValue
		}
		for _, p := range x.Points(&m) {
			var labels []string
			if x.Label() != "" {
				labels = []string{p.Label}
			}
			ch <- prometheus.MustNewConstMetric(c.descs[i], typ, p.Value, labels...)
		}
	}
}
