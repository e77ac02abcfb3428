package etcdkv_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/etcdkv/etcdtest"
)

func qrange(q string) ([]byte, []byte) {
	p := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), q)
	return p, codec.PrefixEnd(p)
}

// A write by another client right after Watch returns always wakes it:
// the watch starts at the revision read before Watch returned.
func TestWatchMissesNothing(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{})
	other := etcdkv.OpenForTest(t, etcdkv.Config{Namespace: s.Namespace()})
	lo, hi := qrange("w")
	for i := range int64(20) {
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := s.Watch(ctx, lo, hi)
		require.NoError(t, err)
		set(t, other, kq("w", i), []byte("x"))
		_, ok := <-ch
		require.True(t, ok, "round %d: the write woke the watch", i)
		cancel()
		for range ch { // closed once ctx ends
		}
	}
}

// A watch's channel closes when its context ends and when the store
// closes.
func TestWatchClosesWithContextAndStore(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{})
	lo, hi := qrange("w")
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := s.Watch(ctx, lo, hi)
	require.NoError(t, err)
	cancel()
	_, ok := <-ch
	require.False(t, ok)

	ch, err = s.Watch(context.Background(), lo, hi)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, ok = <-ch
	require.False(t, ok)
	_, err = s.Watch(context.Background(), lo, hi)
	require.ErrorIs(t, err, engine.ErrClosed)
}

// A watch cut off from the cluster while the revision it must resume from
// is compacted away cannot promise it missed nothing: its channel closes,
// and the caller re-reads.
func TestWatchBreaksWhenResumeIsCompacted(t *testing.T) {
	c := etcdkv.ClusterForTest()
	p, err := etcdtest.NewProxy(c.Endpoint(0))
	require.NoError(t, err)
	defer p.Close()
	s := etcdkv.OpenForTest(t, etcdkv.Config{Endpoints: []string{p.Endpoint()}})
	direct := etcdkv.OpenForTest(t, etcdkv.Config{Namespace: s.Namespace()})
	lo, hi := qrange("w")
	ch, err := s.Watch(context.Background(), lo, hi)
	require.NoError(t, err)
	set(t, direct, kq("w", 1), []byte("seen"))
	_, ok := <-ch
	require.True(t, ok)

	p.Refuse(true)
	p.Cut()
	set(t, direct, kq("w", 2), []byte("missed while cut off"))
	set(t, direct, kq("w", 3), []byte("compacting keeps its revision: compact past w2"))
	rev, err := direct.Revision(context.Background())
	require.NoError(t, err)
	require.NoError(t, direct.CompactRevisions(context.Background(), rev))
	p.Refuse(false)
	for range ch { // a wake-up may be pending; then the channel closes
	}
}
