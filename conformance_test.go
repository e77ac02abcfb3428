package tipkv_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/tipkvtest"
)

// The conformance suite on Pebble, as users run it: one exclusive DB per
// store, reopened from its directory.
func TestConformancePebble(t *testing.T) {
	tipkvtest.Run(t, tipkvtest.Backend{
		Name: "pebble",
		Open: func(t testing.TB, opts *tipkv.Options) *tipkv.DB {
			dir := t.TempDir()
			db, err := tipkv.Open(dir, opts)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			return db
		},
		Reopen: func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB {
			_ = db.Close()
			db2, err := tipkv.Open(db.Dir(), opts)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db2.Close() })
			return db2
		},
	})
}

// The conformance suite on a shared Pebble mode: several DB handles on one
// store, each declaring a shared engine and keeping memory of its own, as
// several processes on etcd or PostgreSQL would. It runs the shared-mode
// code paths (conditions, retries, leases in the store, polling) under the
// race detector without a network engine.
func TestConformanceShared(t *testing.T) {
	for _, so := range []struct {
		name string
		opts sharedstore.Options
	}{
		{"watch", sharedstore.Options{}},
		{"poll", sharedstore.Options{NoWatch: true, MaxBatchOps: 128}},
	} {
		t.Run(so.name, func(t *testing.T) {
			var mu sync.Mutex
			hubs := map[*tipkv.DB]*sharedstore.Hub{}
			hubOf := func(db *tipkv.DB) *sharedstore.Hub {
				mu.Lock()
				defer mu.Unlock()
				return hubs[db]
			}
			handle := func(t testing.TB, h *sharedstore.Hub, name string, opts *tipkv.Options) *tipkv.DB {
				db, err := tipkv.OpenEngine(h.Handle(), name, opts)
				require.NoError(t, err)
				mu.Lock()
				hubs[db] = h
				mu.Unlock()
				t.Cleanup(func() { _ = db.Close() })
				return db
			}
			tipkvtest.Run(t, tipkvtest.Backend{
				Name: "shared-" + so.name,
				Open: func(t testing.TB, opts *tipkv.Options) *tipkv.DB {
					ps, err := pebblestore.Open("shared", pebblestore.Config{InMemory: true, CacheSize: 16 << 20, FormatVersion: tipkv.FormatVersion})
					require.NoError(t, err)
					return handle(t, sharedstore.New(ps, so.opts), "shared-a", opts)
				},
				Reopen: func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB {
					h := hubOf(db)
					db2 := handle(t, h, "shared-restarted", opts) // before Close: the hub keeps the store
					_ = db.Close()
					return db2
				},
				Second: func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB {
					return handle(t, hubOf(db), "shared-b", opts)
				},
			})
		})
	}
}
