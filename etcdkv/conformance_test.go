package etcdkv_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/internal/storage"
	"github.com/tipkv/tipkv/internal/storage/storetest"
)

// The storage contract's conformance suite, on the test cluster: each test
// a namespace of its own, a second client on the same namespace standing in
// for another process.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB) storage.Store {
			return etcdkv.OpenForTest(t, etcdkv.Config{})
		},
		Second: func(t testing.TB, s storage.Store) storage.Store {
			return etcdkv.OpenForTest(t, etcdkv.Config{Namespace: s.(*etcdkv.Store).Namespace()})
		},
		Scale: 4, // the full sizes take 2.3 s here, most of it in the CAS contention test
	})
}

// Open gives a tipkv DB whose store is shared, on the cluster; a second
// Open of the namespace finds the store the first created.
func TestOpen(t *testing.T) {
	ns := etcdkv.NamespaceForTest(t)
	cfg := etcdkv.Config{Endpoints: etcdkv.ClusterForTest().Endpoints(), Namespace: ns}
	db, err := etcdkv.Open(context.Background(), cfg)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	db, err = etcdkv.Open(context.Background(), cfg)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	_, err = etcdkv.Open(context.Background(), etcdkv.Config{})
	require.ErrorIs(t, err, storage.ErrInvalid, "no endpoints")
}
