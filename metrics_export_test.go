package tipkv

// StorageMetricsOf is storageMetrics, for tests.
var StorageMetricsOf = storageMetrics
