package etcdkv_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/etcdkv"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Each condition against the real server, on keys that are present, hold
// an empty value, were deleted, or were never written, and on ranges that
// are empty, were emptied, or hold one key, many keys, or keys at their
// edges.
func TestConditionsOnServer(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{})
	set(t, s, k(5), []byte("five"), k(10), []byte{}, k(7), []byte("gone"))
	del(t, s, k(7))
	for i := int64(20); i < 30; i++ {
		set(t, s, k(i), []byte("many"))
	}
	for i := int64(40); i < 45; i++ {
		set(t, s, k(i), []byte("emptied"))
	}
	require.NoError(t, apply(t, s, func(b engine.Batch) { require.NoError(t, b.DeleteRange(k(40), k(45))) }))

	cases := []struct {
		name string
		c    engine.Cond
		ok   bool
	}{
		{"absent: never written", engine.Absent(k(1)), true},
		{"absent: present", engine.Absent(k(5)), false},
		{"absent: empty value", engine.Absent(k(10)), false},
		{"absent: deleted", engine.Absent(k(7)), true},
		{"present: present", engine.Present(k(5)), true},
		{"present: empty value", engine.Present(k(10)), true},
		{"present: deleted", engine.Present(k(7)), false},
		{"present: never written", engine.Present(k(1)), false},
		{"equals: the value", engine.Equals(k(5), []byte("five")), true},
		{"equals: another value", engine.Equals(k(5), []byte("five!")), false},
		{"equals: empty on an empty value", engine.Equals(k(10), []byte{}), true},
		{"equals: empty on a present value", engine.Equals(k(5), []byte{}), false},
		{"equals: empty on a deleted key", engine.Equals(k(7), []byte{}), false},
		{"equals: empty on a missing key", engine.Equals(k(1), nil), false},
		{"equals: the old value of a deleted key", engine.Equals(k(7), []byte("gone")), false},
		{"empty: never written", engine.Empty(k(100), k(200)), true},
		{"empty: every key deleted", engine.Empty(k(40), k(45)), true},
		{"empty: one deleted key", engine.Empty(k(7), k(8)), true},
		{"empty: one key", engine.Empty(k(4), k(6)), false},
		{"empty: many keys", engine.Empty(k(0), k(1000)), false},
		{"empty: a key at lo", engine.Empty(k(20), k(21)), false},
		{"empty: a key just below hi", engine.Empty(k(30), k(42)), true},
		{"empty: a key just below hi, inclusive", engine.Empty(k(11), k(21)), false},
		{"empty: a key at hi is outside", engine.Empty(k(11), k(20)), true},
		{"empty: an empty value", engine.Empty(k(10), k(11)), false},
		{"empty: another queue", engine.Empty(kq("r", 0), kq("r", 1000)), true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mark := kq("mark", int64(i))
			err := apply(t, s, func(b engine.Batch) {
				require.NoError(t, b.Require(tc.c))
				require.NoError(t, b.Set(mark, []byte("x")))
			})
			if tc.ok {
				require.NoError(t, err)
				require.True(t, has(t, s, mark))
				return
			}
			require.ErrorIs(t, err, engine.ErrConditionFailed)
			require.NotErrorIs(t, err, engine.ErrUnknownOutcome)
			require.False(t, has(t, s, mark), "a failed condition writes nothing")
		})
	}
}

// etcd refuses some batches as written; the store sends them normalised.
// Raw clientv3 shows the refusals, the store the same batches applied.
func TestTxnRulesNormalised(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{})
	ns := s.Namespace()
	key := func(i int64) string { return ns + string(k(i)) }
	ctx := context.Background()
	set(t, s, k(1), []byte("1"), k(2), []byte("2"), k(3), []byte("3"))

	refused := map[string][]clientv3.Op{
		"a key put twice":          {clientv3.OpPut(key(5), "a"), clientv3.OpPut(key(5), "b")},
		"a put and a delete":       {clientv3.OpPut(key(5), "a"), clientv3.OpDelete(key(5))},
		"a put in a deleted range": {clientv3.OpDelete(key(1), clientv3.WithRange(key(4))), clientv3.OpPut(key(2), "x")},
	}
	for name, ops := range refused {
		_, err := s.Client().Txn(ctx).Then(ops...).Commit()
		require.ErrorIs(t, err, rpctypes.ErrDuplicateKey, name)
	}
	accepted := map[string][]clientv3.Op{
		"double deletes":              {clientv3.OpDelete(key(9)), clientv3.OpDelete(key(9))},
		"a delete in a deleted range": {clientv3.OpDelete(key(7), clientv3.WithRange(key(9))), clientv3.OpDelete(key(8))},
		"overlapping ranges":          {clientv3.OpDelete(key(7), clientv3.WithRange(key(9))), clientv3.OpDelete(key(8), clientv3.WithRange(key(10)))},
	}
	for name, ops := range accepted {
		_, err := s.Client().Txn(ctx).Then(ops...).Commit()
		require.NoError(t, err, name)
	}
	_, err := s.Client().Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key(5)), "=", 0)).Then(clientv3.OpPut(key(5), "x")).Commit()
	require.NoError(t, err, "a compare and a write of one key")

	require.NoError(t, apply(t, s, func(b engine.Batch) {
		require.NoError(t, b.Set(k(6), []byte("a")))
		require.NoError(t, b.Set(k(6), []byte("b")))
		require.NoError(t, b.Set(k(7), []byte("a")))
		require.NoError(t, b.Delete(k(7)))
		require.NoError(t, b.DeleteRange(k(1), k(4)))
		require.NoError(t, b.Set(k(2), []byte("back")))
		require.NoError(t, b.Require(engine.Present(k(2))))
	}))
	v, err := s.Get(k(6))
	require.NoError(t, err)
	require.Equal(t, "b", string(v))
	require.False(t, has(t, s, k(7)))
	require.False(t, has(t, s, k(1)))
	v, err = s.Get(k(2))
	require.NoError(t, err)
	require.Equal(t, "back", string(v))
	require.False(t, has(t, s, k(3)))
}

// A failed commit names the keys of its conditions, as tipkv gave them:
// only those that failed when the txn had writes and room to ask which
// (one op to spare under MaxTxnOps), every condition's otherwise. Either
// way the error matches ErrConditionFailed.
func TestConditionErrorNamesKeys(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{MaxTxnOps: 5})
	set(t, s, k(1), []byte("a"))
	keysOf := func(err error) [][]byte {
		t.Helper()
		require.ErrorIs(t, err, engine.ErrConditionFailed)
		var ce *engine.ConditionError
		require.ErrorAs(t, err, &ce)
		return ce.Keys
	}
	conds := []engine.Cond{
		engine.Present(k(1)),          // holds
		engine.Absent(k(1)),           // fails
		engine.Equals(k(2), []byte{}), // fails: missing
		engine.Empty(k(10), k(20)),    // holds
	}
	requireAll := func(b engine.Batch) {
		for _, c := range conds {
			require.NoError(t, b.Require(c))
		}
	}

	err := apply(t, s, func(b engine.Batch) {
		requireAll(b)
		require.NoError(t, b.Set(k(3), []byte("x")))
	})
	require.Equal(t, [][]byte{k(1), k(2)}, keysOf(err), "the conditions that failed")
	require.False(t, has(t, s, k(3)))

	err = apply(t, s, func(b engine.Batch) { requireAll(b) })
	require.Equal(t, [][]byte{k(1), k(2), k(10)}, keysOf(err), "no writes: every condition")

	conds = append(conds, engine.Absent(k(30)))
	err = apply(t, s, func(b engine.Batch) {
		requireAll(b)
		require.NoError(t, b.Set(k(3), []byte("x")))
	})
	require.Equal(t, [][]byte{k(1), k(2), k(10), k(30)}, keysOf(err), "MaxTxnOps conditions: no op to spare, every condition")
}
