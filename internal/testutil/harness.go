package testutil

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/engine/enginetest"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/sharedstore"
)

// PebbleHarness runs the suites on Pebble as tipkv.Open does: each store
// in a directory of its own, reopened from it.
func PebbleHarness() enginetest.Harness {
	open := func(t testing.TB, dir string) engine.Store {
		t.Helper()
		s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 32 << 20, FormatVersion: tipkv.FormatVersion})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return enginetest.Harness{
		Name: "pebble",
		Open: func(t testing.TB) engine.Store { return open(t, t.TempDir()) },
		Reopen: func(t testing.TB, s engine.Store) engine.Store {
			return open(t, s.(*pebblestore.Store).Dir())
		},
	}
}

// PebbleMemHarness runs the suites on Pebble in memory: quicker, with no
// Reopen.
func PebbleMemHarness() enginetest.Harness {
	return enginetest.Harness{
		Name: "pebble-mem",
		Open: func(t testing.TB) engine.Store {
			s, err := pebblestore.Open("db", pebblestore.Config{InMemory: true, CacheSize: 8 << 20, FormatVersion: tipkv.FormatVersion})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

// SharedHarness runs the suites on sharedstore: handles on one in-memory
// Pebble store, each declaring a shared engine, standing in for the
// processes of a shared engine. The harness keeps a handle of its own on
// each store until the test ends, so that a store outlives its handles'
// Close for Reopen.
func SharedHarness(name string, so sharedstore.Options) enginetest.Harness {
	var mu sync.Mutex
	hubs := map[engine.Store]*sharedstore.Hub{}
	handle := func(t testing.TB, h *sharedstore.Hub) engine.Store {
		s := h.Handle()
		mu.Lock()
		hubs[s] = h
		mu.Unlock()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	hubOf := func(s engine.Store) *sharedstore.Hub {
		mu.Lock()
		defer mu.Unlock()
		return hubs[s]
	}
	another := func(t testing.TB, s engine.Store) engine.Store { return handle(t, hubOf(s)) }
	return enginetest.Harness{
		Name: name,
		Open: func(t testing.TB) engine.Store {
			ps, err := pebblestore.Open("shared", pebblestore.Config{InMemory: true, CacheSize: 16 << 20, FormatVersion: tipkv.FormatVersion})
			require.NoError(t, err)
			h := sharedstore.New(ps, so)
			handle(t, h) // kept until the test ends
			return handle(t, h)
		},
		Second: another,
		Reopen: another,
	}
}
