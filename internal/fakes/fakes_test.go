package fakes_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/fakes"
	"github.com/tipkv/tipkv/internal/testutil"
)

// A borrowed store leaves the store open when it closes, counts the
// commits the store refused on a condition, and runs an iterator hook
// once, after the first matching iterator closes.
func TestBorrowed(t *testing.T) {
	s := testutil.PebbleMemHarness().Open(t)
	bs := fakes.Borrow(s)

	b := bs.NewBatch()
	require.NoError(t, b.Set([]byte("k"), []byte("v")))
	require.NoError(t, b.Apply(true))
	require.NoError(t, b.Close())
	b = bs.NewBatch()
	require.NoError(t, b.Require(engine.Absent([]byte("k"))))
	require.NoError(t, b.Set([]byte("k"), []byte("w")))
	require.ErrorIs(t, b.Apply(true), engine.ErrConditionFailed)
	require.NoError(t, b.Close())
	require.Equal(t, int64(1), bs.FailedConditions())

	runs := 0
	bs.OnIterClose(func(lo []byte) bool { return bytes.Equal(lo, []byte("k")) }, func() { runs++ })
	for _, lo := range []string{"a", "k", "k"} {
		it, err := bs.NewIter([]byte(lo), []byte("z"))
		require.NoError(t, err)
		require.NoError(t, it.Close())
	}
	require.Equal(t, 1, runs, "once, for the first iterator from k")

	require.NoError(t, bs.Close())
	v, err := s.Get([]byte("k"))
	require.NoError(t, err, "the store is still open")
	require.Equal(t, "v", string(v))
}
