package sharedstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/storage"
	"github.com/tipkv/tipkv/internal/storage/pebblestore"
	"github.com/tipkv/tipkv/internal/storage/sharedstore"
	"github.com/tipkv/tipkv/internal/storage/storetest"
)

// The shared handles honour the contract, with a second handle standing in
// for a second process.
func TestConformance(t *testing.T) {
	for _, opts := range []sharedstore.Options{{}, {NoWatch: true, MaxBatchOps: 64}} {
		hubs := map[storage.Store]*sharedstore.Hub{}
		storetest.Run(t, storetest.Harness{
			Open: func(t testing.TB) storage.Store {
				ps, err := pebblestore.Open("db", pebblestore.Config{InMemory: true, CacheSize: 8 << 20})
				require.NoError(t, err)
				h := sharedstore.New(ps, opts)
				s := h.Handle()
				hubs[s] = h
				return s
			},
			Second: func(t testing.TB, s storage.Store) storage.Store {
				x := hubs[s].Handle()
				t.Cleanup(func() { _ = x.Close() })
				return x
			},
		})
	}
}
