package etcdkv_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/etcdkv"
)

// The limits count the txn as sent: writes once normalised, and
// conditions separately.
func TestLimitsCountNormalisedOps(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{})
	caps := s.Caps()
	require.Equal(t, etcdkv.DefaultMaxTxnOps, caps.MaxBatchOps)
	all := func() int { return count(t, s, kq("q", 0), codec.PrefixEnd(kq("q", 0)[:len(kq("q", 0))-8])) }

	require.NoError(t, apply(t, s, func(b engine.Batch) {
		for i := range 3 * caps.MaxBatchOps {
			require.NoError(t, b.Set(k(1), []byte{byte(i)}))
		}
	}), "many writes of one key are one op")

	err := apply(t, s, func(b engine.Batch) {
		require.NoError(t, b.DeleteRange(k(0), k(1000)))
		for i := range int64(caps.MaxBatchOps / 2) {
			require.NoError(t, b.Set(k(2*i+1), []byte("x")))
		}
	})
	require.ErrorIs(t, err, engine.ErrInvalid, "a range split by %d sets is %d ops", caps.MaxBatchOps/2, caps.MaxBatchOps+1)
	require.Equal(t, 1, all(), "nothing written")

	err = apply(t, s, func(b engine.Batch) {
		for i := range int64(caps.MaxBatchOps + 1) {
			require.NoError(t, b.Require(engine.Absent(k(1000+i))))
		}
		require.NoError(t, b.Set(k(2), []byte("x")))
	})
	require.ErrorIs(t, err, engine.ErrInvalid, "conditions over the limit")
	require.Equal(t, 1, all())

	require.NoError(t, apply(t, s, func(b engine.Batch) {
		for i := range int64(caps.MaxBatchOps) {
			require.NoError(t, b.Require(engine.Absent(k(1000+i))))
			require.NoError(t, b.Set(k(2000+i), []byte("x")))
		}
	}), "MaxBatchOps conditions and MaxBatchOps writes")
	require.Equal(t, 1+caps.MaxBatchOps, all())
}

// A batch of exactly MaxBatchBytes, in MaxBatchOps writes and as many
// conditions, fits in the server's request limit: the margin covers the
// framing. One byte more is refused before sending.
func TestLimitsBytesMargin(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{})
	caps := s.Caps()
	fill := func(extra int) error {
		return apply(t, s, func(b engine.Batch) {
			used := 0
			for i := range int64(caps.MaxBatchOps) {
				c := engine.Absent(kq("cond", i))
				require.NoError(t, b.Require(c))
				used += c.Size()
			}
			n := caps.MaxBatchOps
			keyLen := len(kq("big", 0))
			per := (caps.MaxBatchBytes - used) / n
			for i := range n {
				size := per - keyLen
				if i == 0 {
					size += (caps.MaxBatchBytes - used) - per*n + extra
				}
				require.NoError(t, b.Set(kq("big", int64(i)), bytes.Repeat([]byte{'v'}, size)))
			}
			require.Equal(t, caps.MaxBatchBytes+extra, b.Size())
		})
	}
	require.ErrorIs(t, fill(1), engine.ErrInvalid)
	require.False(t, has(t, s, kq("big", 0)))
	require.NoError(t, fill(0), "a batch of MaxBatchBytes reaches the server and commits")
	require.True(t, has(t, s, kq("big", 0)))
}

// A store told the server takes more than it does still refuses the
// batch, with the server's refusal as ErrInvalid, and nothing is written.
func TestLimitsServerLowerThanConfig(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{MaxTxnOps: 4 * etcdkv.DefaultMaxTxnOps})
	err := apply(t, s, func(b engine.Batch) {
		for i := range int64(2 * etcdkv.DefaultMaxTxnOps) {
			require.NoError(t, b.Set(k(i), []byte("x")))
		}
	})
	require.ErrorIs(t, err, engine.ErrInvalid)
	require.NotErrorIs(t, err, engine.ErrUnknownOutcome)
	require.False(t, has(t, s, k(0)))
}
