package etcdkv_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/engine/enginetest"
	"github.com/tipkv/tipkv/etcdkv"
)

// harness runs the suites on the test cluster: each store on a namespace
// of its own; Second and Reopen open the namespace again with a client of
// their own, as another process (or this one restarted) would.
func harness() enginetest.Harness {
	another := func(t testing.TB, s engine.Store) engine.Store {
		return etcdkv.OpenForTest(t, etcdkv.Config{Namespace: s.(*etcdkv.Store).Namespace()})
	}
	return enginetest.Harness{
		Name:   "etcd",
		Open:   func(t testing.TB) engine.Store { return etcdkv.OpenForTest(t, etcdkv.Config{}) },
		Second: another,
		Reopen: another,
	}
}

// The storage contract's conformance suite, on the test cluster.
func TestConformance(t *testing.T) {
	h := harness()
	h.Scale = 4 // the full sizes take 2.3 s here, most of it in the CAS contention test
	enginetest.Run(t, h)
}

// Open gives a tipkv DB whose store is shared, on the cluster; a second
// Open of the namespace finds the store the first created.
func TestOpen(t *testing.T) {
	ns := etcdkv.NamespaceForTest(t)
	cfg := etcdkv.Config{Endpoints: etcdkv.ClusterForTest().Endpoints(), Namespace: ns}
	db, err := etcdkv.Open(context.Background(), cfg, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	db, err = etcdkv.Open(context.Background(), cfg, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	_, err = etcdkv.Open(context.Background(), etcdkv.Config{}, nil)
	require.ErrorIs(t, err, engine.ErrInvalid, "no endpoints")
}

// A store without a namespace owns the cluster's whole key space; it works
// as any other (here on a queue no other test names).
func TestEmptyNamespace(t *testing.T) {
	s, err := etcdkv.NewStore(context.Background(), etcdkv.Config{Endpoints: etcdkv.ClusterForTest().Endpoints()})
	require.NoError(t, err)
	defer s.Close()
	lo, hi := qrange("empty-namespace")
	set(t, s, kq("empty-namespace", 1), []byte("x"))
	require.True(t, has(t, s, kq("empty-namespace", 1)))
	require.Equal(t, 1, count(t, s, lo, hi))
	require.NoError(t, apply(t, s, func(b engine.Batch) { require.NoError(t, b.DeleteRange(lo, hi)) }))
	require.Equal(t, 0, count(t, s, lo, hi))
	_, err = s.NewSnapshot()
	require.NoError(t, err)
}
