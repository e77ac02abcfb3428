package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
)

// pausedStore hands its next iterator a view taken when the iterator was
// asked for, then holds the caller until the test lets it go: a read that
// began before another goroutine's commit and reads its pages after it.
type pausedStore struct {
	engine.Store
	armed   bool
	entered chan struct{}
	proceed chan struct{}
}

func (s *pausedStore) NewIter(lo, hi []byte) (engine.Iter, error) {
	if !s.armed {
		return s.Store.NewIter(lo, hi)
	}
	s.armed = false
	snap, err := s.Store.NewSnapshot()
	if err != nil {
		return nil, err
	}
	close(s.entered)
	<-s.proceed
	it, err := snap.NewIter(lo, hi)
	if err != nil {
		_ = snap.Close()
		return nil, err
	}
	return &snapIter{Iter: it, snap: snap}, nil
}

type snapIter struct {
	engine.Iter
	snap engine.Snapshot
}

func (it *snapIter) Close() error {
	err := it.Iter.Close()
	_ = it.snap.Close()
	return err
}

// A Receive whose read began before another goroutine of the same handle
// leased a message, and that sees the message unleased, leaves that lease
// alone: the other goroutine's Ack succeeds. (It used to take the old
// bytes for another process's change and drop the lease: ErrLeaseLost.)
func TestSharedStaleReadKeepsFreshLease(t *testing.T) {
	dbs := openShared(t, 1)
	q, err := Open[int](dbs[0], "q", nil)
	require.NoError(t, err)
	enqueueN(t, dbs[0], q, 2)

	ps := &pausedStore{Store: q.c.store, armed: true, entered: make(chan struct{}), proceed: make(chan struct{})}
	q.c.store = ps
	type result struct {
		ms  []Message[int]
		err error
	}
	late := make(chan result, 1)
	go func() {
		ms, err := q.Receive(1, time.Hour)
		late <- result{ms, err}
	}()
	<-ps.entered // the late Receive's view is taken: both messages unleased

	first, err := q.Receive(1, time.Hour)
	require.NoError(t, err)
	require.Len(t, first, 1)
	require.Equal(t, int64(1), first[0].Seq)
	close(ps.proceed)
	r := <-late
	require.NoError(t, r.err)
	require.Len(t, r.ms, 1)
	require.Equal(t, int64(2), r.ms[0].Seq, "the late Receive passes over the message leased meanwhile")

	require.NoError(t, q.Ack(dbs[0], first[0].ID), "the fresh lease survives the stale read")
	require.NoError(t, q.Ack(dbs[0], r.ms[0].ID))
}
