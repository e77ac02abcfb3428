// Package metrics is the root of the module that exports tipkv's figures
// (tipkv.DB.Metrics) to monitoring systems, kept apart from tipkv so that
// tipkv itself depends on Pebble, msgpack and nothing else:
//
//   - tipkvprom: a Prometheus collector (client_golang).
//   - tipkvotel: an OpenTelemetry bridge (asynchronous instruments on a
//     metric.MeterProvider).
//
// Both publish the same metrics under the same names (Prometheus spells
// them with underscores and unit suffixes, OpenTelemetry with dots and a
// unit): store-wide figures of the storage engine, per-level figures of
// the LSM tree (label "level"), per queue and per collection figures
// (labels "queue", "collection"), per feed retention figures (label
// "streams": the prefix of the stream names it bounds), and tipkv's
// store-wide figures of feeds and retention passes. Both read DB.Metrics once per scrape or
// collection: on Pebble well under a millisecond for a store of a few
// dozen files (a stat of each file in the store's directory is most of
// it, see tipkv.DB.Metrics).
package metrics
