package sharedstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/engine/enginetest"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/sharedstore"
)

// The shared handles honour the contract, with a second handle standing in
// for a second process.
func TestConformance(t *testing.T) {
	for _, opts := range []sharedstore.Options{{}, {NoWatch: true, MaxBatchOps: 64}} {
		hubs := map[engine.Store]*sharedstore.Hub{}
		enginetest.Run(t, enginetest.Harness{
			Open: func(t testing.TB) engine.Store {
				ps, err := pebblestore.Open("db", pebblestore.Config{InMemory: true, CacheSize: 8 << 20})
				require.NoError(t, err)
				h := sharedstore.New(ps, opts)
				s := h.Handle()
				hubs[s] = h
				return s
			},
			Second: func(t testing.TB, s engine.Store) engine.Store {
				x := hubs[s].Handle()
				t.Cleanup(func() { _ = x.Close() })
				return x
			},
		})
	}
}
