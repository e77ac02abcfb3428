package etcdkv_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// openTestDB opens a DB on a namespace of its own on the test cluster.
func openTestDB(t *testing.T) *tipkv.DB {
	t.Helper()
	db, err := etcdkv.Open(context.Background(), etcdkv.Config{
		Endpoints: etcdkv.ClusterForTest().Endpoints(),
		Namespace: etcdkv.NamespaceForTest(t),
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// An Update of more writes than a txn takes (the server's --max-txn-ops,
// 128 by default) is not split, which would break its atomicity: it fails
// with ErrInvalid, says so, and writes nothing. One of 100 messages and a
// document fits.
func TestUpdateOverTxnLimit(t *testing.T) {
	db := openTestDB(t)
	docs, err := versioned.NewCollection[string](db, "orders", nil)
	require.NoError(t, err)
	q, err := queue.Open[int](db, "outbox", nil)
	require.NoError(t, err)
	outbox := func(n int) error {
		return db.Update(func(b *tipkv.Batch) error {
			if _, err := docs.Put(b, "order-1", "placed"); err != nil {
				return err
			}
			_, err := q.Enqueue(b, make([]int, n)...)
			return err
		})
	}
	err = outbox(999)
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorContains(t, err, "--max-txn-ops")
	_, err = docs.Latest("order-1")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	n, err := q.ReadStats()
	require.NoError(t, err)
	require.Zero(t, n.Len)

	require.NoError(t, outbox(100))
	d, err := docs.Latest("order-1")
	require.NoError(t, err)
	require.Equal(t, int64(1), d.Version)
	n, err = q.ReadStats()
	require.NoError(t, err)
	require.Equal(t, 100, n.Len)
}
