package etcdkv

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A cluster lock passed on inside a process is never held while its new
// holder waits for a lock that comes before it: a Lock of several
// prefixes deletes a passed key before it queues for any.
//
// Store x holds b; store y holds a and waits for b; a goroutine of x asks
// for {a, b} and waits for b's token. When x's holder unlocks, b's key is
// passed to that goroutine, which then queues for a behind y. Were b's key
// still held, y would wait for it and x for y: deadlock (the hang CI met
// in the racing PutOnce test).
func TestPassedLockNeverHeldOutOfOrder(t *testing.T) {
	x := OpenForTest(t, Config{})
	y := OpenForTest(t, Config{Namespace: x.Namespace()})
	a := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "a")
	b := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "b")
	// A deadlock fails the test instead of hanging it; the bound is far
	// above what these few round trips take on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	unlockB, _, err := x.Lock(ctx, [][]byte{b})
	require.NoError(t, err)

	yDone := make(chan error, 1)
	go func() {
		unlock, _, err := y.Lock(ctx, [][]byte{a, b})
		if err == nil {
			unlock()
		}
		yDone <- err
	}()
	waitDirKeys(t, x, b, 2) // y holds a and queues for b

	xDone := make(chan error, 1)
	go func() {
		unlock, _, err := x.Lock(ctx, [][]byte{a, b})
		if err == nil {
			unlock()
		}
		xDone <- err
	}()
	// x's second goroutine holds a's token and waits for b's.
	for x.plocks.refsOf(b) < 2 {
		time.Sleep(time.Millisecond)
	}
	unlockB()

	require.NoError(t, <-yDone)
	require.NoError(t, <-xDone)
}

// refsOf returns how many goroutines hold or wait for prefix's token.
func (p *procLocks) refsOf(prefix []byte) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.m[string(prefix)]; l != nil {
		return l.refs
	}
	return 0
}

// waitDirKeys blocks until prefix's lock directory holds n keys, watching
// it.
func waitDirKeys(t *testing.T, s *Store, prefix []byte, n int64) {
	t.Helper()
	dir := s.lockDir(prefix) + "/"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := s.c.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	if resp.Count == n {
		return
	}
	for wr := range s.c.Watch(ctx, dir, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		require.NoError(t, wr.Err())
		resp, err := s.c.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		require.NoError(t, err)
		if resp.Count == n {
			return
		}
	}
	t.Fatalf("the watch of the lock directory ended before it held %d keys", n)
}
