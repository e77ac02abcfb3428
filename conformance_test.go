package tipkv_test

import (
	"testing"

	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/tipkvtest"
)

// The conformance suite on Pebble: one exclusive DB per store, reopened
// from its directory.
func TestConformancePebble(t *testing.T) {
	tipkvtest.Run(t, testutil.PebbleHarness())
}

// The conformance suite on a shared Pebble mode: several DB handles on one
// store, each declaring a shared engine and keeping memory of its own, as
// several processes on etcd or PostgreSQL would. It runs the shared-mode
// code paths (conditions, retries, leases in the store, polling) under the
// race detector without a network engine.
func TestConformanceShared(t *testing.T) {
	t.Run("watch", func(t *testing.T) {
		tipkvtest.Run(t, testutil.SharedHarness("shared-watch", sharedstore.Options{}))
	})
	t.Run("poll", func(t *testing.T) {
		tipkvtest.Run(t, testutil.SharedHarness("shared-poll", sharedstore.Options{NoWatch: true, MaxBatchOps: 128}))
	})
}
