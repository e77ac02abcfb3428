package etcdkv_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// k is a queue item key: 02 | "q" | asc(i).
func k(i int64) []byte { return kq("q", i) }

func kq(q string, i int64) []byte {
	return codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), q), i)
}

func apply(t testing.TB, s engine.Store, f func(b engine.Batch)) error {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	f(b)
	return b.Apply(true)
}

func set(t testing.TB, s engine.Store, kv ...[]byte) {
	t.Helper()
	require.NoError(t, apply(t, s, func(b engine.Batch) {
		for i := 0; i < len(kv); i += 2 {
			require.NoError(t, b.Set(kv[i], kv[i+1]))
		}
	}))
}

func del(t testing.TB, s engine.Store, keys ...[]byte) {
	t.Helper()
	require.NoError(t, apply(t, s, func(b engine.Batch) {
		for _, key := range keys {
			require.NoError(t, b.Delete(key))
		}
	}))
}

func has(t testing.TB, r engine.Reader, key []byte) bool {
	t.Helper()
	_, err := r.Get(key)
	if errors.Is(err, engine.ErrNotFound) {
		return false
	}
	require.NoError(t, err)
	return true
}

// count returns how many keys [lo, hi) holds.
func count(t testing.TB, r engine.Reader, lo, hi []byte) int {
	t.Helper()
	it, err := r.NewIter(lo, hi)
	require.NoError(t, err)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	require.NoError(t, it.Close())
	return n
}
