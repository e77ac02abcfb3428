package etcdkv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/etcdkv/etcdtest"
)

// proxied opens a store that reaches member 0 only through a fault proxy,
// and a direct store on the same namespace to look with.
func proxied(t *testing.T, cfg etcdkv.Config) (*etcdtest.Proxy, *etcdkv.Store, *etcdkv.Store) {
	t.Helper()
	p, err := etcdtest.NewProxy(etcdkv.ClusterForTest().Endpoint(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	cfg.Endpoints = []string{p.Endpoint()}
	s := etcdkv.OpenForTest(t, cfg)
	direct := etcdkv.OpenForTest(t, etcdkv.Config{Namespace: s.Namespace()})
	_, err = s.Get(k(0)) // the connection is up before the faults
	require.ErrorIs(t, err, engine.ErrNotFound)
	return p, s, direct
}

// versionOf is how many times key was put since it was created (etcd's
// per-key version): 1 means exactly one put.
func versionOf(t *testing.T, s *etcdkv.Store, key []byte) int64 {
	t.Helper()
	resp, err := s.Client().Get(context.Background(), s.Namespace()+string(key))
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].Version
}

// The txn reaches the cluster and commits; its answer never comes back
// (the connection drops after the commit). Apply reports an unknown
// outcome, and the store did not send it again: the key was put once.
func TestUnknownOutcomeAfterCommit(t *testing.T) {
	p, s, direct := proxied(t, etcdkv.Config{})
	lo, hi := qrange("q")
	woke, err := direct.Watch(context.Background(), lo, hi)
	require.NoError(t, err)

	p.DropResponses(true)
	done := make(chan error, 1)
	go func() {
		done <- apply(t, s, func(b engine.Batch) { require.NoError(t, b.Set(k(1), []byte("x"))) })
	}()
	<-woke // the cluster applied it
	p.Cut()
	err = <-done
	require.ErrorIs(t, err, engine.ErrUnknownOutcome)
	require.Equal(t, int64(1), versionOf(t, direct, k(1)), "committed once, never resent")
}

// The txn never reaches the cluster: the outcome is still unknown to the
// store (it cannot tell a lost request from a lost answer), and nothing
// was written.
func TestUnknownOutcomeRequestLost(t *testing.T) {
	p, s, direct := proxied(t, etcdkv.Config{RequestTimeout: time.Second})
	p.DropRequests(true)
	err := apply(t, s, func(b engine.Batch) {
		require.NoError(t, b.Require(engine.Absent(k(1))))
		require.NoError(t, b.Set(k(1), []byte("x")))
	})
	require.ErrorIs(t, err, engine.ErrUnknownOutcome)
	require.NotErrorIs(t, err, engine.ErrConditionFailed)
	require.False(t, has(t, direct, k(1)))

	// Reads fail plainly: nothing to be unsure about.
	_, err = s.Get(k(1))
	require.Error(t, err)
	require.NotErrorIs(t, err, engine.ErrUnknownOutcome)
}

// Close during a commit cancels it: the error matches ErrClosed and
// ErrUnknownOutcome, since the txn was sent.
func TestUnknownOutcomeOnClose(t *testing.T) {
	p, s, direct := proxied(t, etcdkv.Config{})
	lo, hi := qrange("q")
	woke, err := direct.Watch(context.Background(), lo, hi)
	require.NoError(t, err)
	p.DropResponses(true)
	done := make(chan error, 1)
	go func() {
		done <- apply(t, s, func(b engine.Batch) { require.NoError(t, b.Set(k(1), []byte("x"))) })
	}()
	<-woke
	require.NoError(t, s.Close())
	err = <-done
	require.ErrorIs(t, err, engine.ErrUnknownOutcome)
	require.ErrorIs(t, err, engine.ErrClosed)
	require.Equal(t, int64(1), versionOf(t, direct, k(1)))
}

// A cluster that loses its quorum: a member with no leader refuses a txn
// at once (the store asks for a leader), a plain error, nothing written;
// a txn caught while the member still believes in its dead leader is an
// unknown outcome. Either way the store never reports success nor resends.
// Once the quorum is back, writes go through.
func TestQuorumLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of its own")
	}
	c, err := etcdtest.Start(etcdtest.Options{})
	require.NoError(t, err)
	defer c.Close()
	s := etcdkv.OpenForTest(t, etcdkv.Config{Endpoints: []string{c.Endpoint(0)}, RequestTimeout: time.Second})
	set(t, s, k(0), []byte("before"))
	start := time.Now()
	c.Stop(1)
	c.Stop(2)
	t.Logf("stopped two members in %v", time.Since(start))
	sawDefinite := false // the member notices within an election timeout
	for i := int64(1); !sawDefinite && i < 100; i++ {
		err := apply(t, s, func(b engine.Batch) { require.NoError(t, b.Set(k(i), []byte("x"))) })
		require.Error(t, err, "no quorum, no commit")
		if errors.Is(err, engine.ErrUnknownOutcome) {
			continue // the member had not yet noticed; try again
		}
		t.Logf("write %d: %v", i, err)
		sawDefinite = true
	}
	require.True(t, sawDefinite, "the member never noticed it lost its leader")
	start = time.Now()
	require.NoError(t, c.Restart(1))
	require.NoError(t, c.Restart(2))
	t.Logf("restarted them in %v", time.Since(start))
	// A member reports ready once the cluster has a leader again; should
	// it still lose it, a definite refusal may be retried, and the
	// condition makes a retry after an unknown outcome harmless.
	for try := 0; try < 50; try++ {
		err := apply(t, s, func(b engine.Batch) {
			require.NoError(t, b.Require(engine.Absent(kq("after", 1))))
			require.NoError(t, b.Set(kq("after", 1), []byte("after")))
		})
		if err == nil || errors.Is(err, engine.ErrConditionFailed) {
			break
		}
		t.Logf("after the restart: %v", err)
	}
	require.True(t, has(t, s, kq("after", 1)), "writes go through once the quorum is back")
}
