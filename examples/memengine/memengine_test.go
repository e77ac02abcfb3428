package memengine_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/engine/enginetest"
	"github.com/tipkv/tipkv/examples/memengine"
	"github.com/tipkv/tipkv/tipkvtest"
)

// harness opens each test's store on a Memory of its own; Reopen opens
// the Memory again after the store closed, as a restarted process would
// reopen its files. With shared, every store declares a shared engine and
// Second opens another on the same Memory, as another process would.
func harness(shared bool) enginetest.Harness {
	opts := &memengine.Options{Shared: shared}
	open := func(t testing.TB, m *memengine.Memory) engine.Store {
		t.Helper()
		s, err := m.Open(opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	h := enginetest.Harness{
		Name: "memengine",
		Open: func(t testing.TB) engine.Store { return open(t, memengine.New()) },
		Reopen: func(t testing.TB, s engine.Store) engine.Store {
			return open(t, s.(*memengine.Store).Memory())
		},
	}
	if shared {
		h.Name = "memengine-shared"
		h.Second = h.Reopen
	}
	return h
}

// Both public suites, through their public entry points, on an engine
// written outside tipkv's module: the contract store by store
// (enginetest), then tipkv's documents, feeds and queues on DBs that
// tipkv.OpenEngine makes on it (tipkvtest). Exclusive stores run the
// in-memory code paths of tipkv's packages; shared ones their conditions,
// retries and watches, with a second store standing in for a second
// process.
func TestConformance(t *testing.T) {
	for _, shared := range []bool{false, true} {
		h := harness(shared)
		t.Run(h.Name, func(t *testing.T) {
			t.Run("enginetest", func(t *testing.T) { enginetest.Run(t, h) })
			t.Run("tipkvtest", func(t *testing.T) { tipkvtest.Run(t, h) })
		})
	}
}

// An exclusive Memory holds one store at a time, as Pebble's directory
// lock does; shared stores may be many, but not beside an exclusive one.
func TestOpenLocks(t *testing.T) {
	m := memengine.New()
	s, err := m.Open(nil)
	require.NoError(t, err)
	_, err = m.Open(nil)
	require.ErrorIs(t, err, engine.ErrLocked)
	_, err = m.Open(&memengine.Options{Shared: true})
	require.ErrorIs(t, err, engine.ErrLocked)
	require.NoError(t, s.Close())

	a, err := m.Open(&memengine.Options{Shared: true})
	require.NoError(t, err)
	b, err := m.Open(&memengine.Options{Shared: true})
	require.NoError(t, err)
	_, err = m.Open(nil)
	require.ErrorIs(t, err, engine.ErrLocked)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	s, err = m.Open(nil)
	require.NoError(t, err, "the last shared store closed")
	require.NoError(t, s.Close())
}
