package etcdkv_test

import (
	"context"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/etcdkv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// docKey is the key of version v of document "users"/id.
func docKey(id string, v int64) []byte {
	k := codec.AppendFamily(nil, codec.FamilyVersions)
	k = codec.AppendString(k, "users")
	k = codec.AppendString(k, id)
	return codec.AppendAsc(k, v)
}

// lockDir is the etcd key prefix of the keys of prefix's lock, as lock.go
// draws it: the namespace, 64 FF bytes, "locks/", the prefix in hex, "/".
func lockDir(s *etcdkv.Store, prefix []byte) string {
	_, hi := codec.Keyspace()
	return s.Namespace() + string(hi) + "locks/" + hex.EncodeToString(prefix) + "/"
}

// lockKeys returns how many keys prefix's lock directory holds, and the
// revision read.
func lockKeys(t testing.TB, s *etcdkv.Store, prefix []byte) (int64, int64) {
	t.Helper()
	resp, err := s.Client().Get(context.Background(), lockDir(s, prefix), clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Count, resp.Header.Revision
}

// waitLockKeys blocks until prefix's lock directory holds n keys, by
// watching it: an event, not a pause.
func waitLockKeys(t testing.TB, s *etcdkv.Store, prefix []byte, n int64) {
	t.Helper()
	got, rev := lockKeys(t, s, prefix)
	if got == n {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for wr := range s.Client().Watch(ctx, lockDir(s, prefix), clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		require.NoError(t, wr.Err())
		if got, _ = lockKeys(t, s, prefix); got == n {
			return
		}
	}
	t.Fatalf("the watch of the lock directory ended with %d keys, not %d", got, n)
}

// Two stores on one namespace exclude each other: the second waits, with
// its key queued in the lock's directory, until the first unlocks, and
// then says it waited. One key per store; none once both unlocked.
func TestLockExcludesAcrossStores(t *testing.T) {
	s1 := etcdkv.OpenForTest(t, etcdkv.Config{})
	s2 := etcdkv.OpenForTest(t, etcdkv.Config{Namespace: s1.Namespace()})
	p := engine.LockPrefix(docKey("alice", 1))
	ctx := context.Background()

	unlock1, waited, err := s1.Lock(ctx, [][]byte{p})
	require.NoError(t, err)
	require.False(t, waited)
	n, _ := lockKeys(t, s1, p)
	require.EqualValues(t, 1, n)

	type locked struct {
		unlock func()
		waited bool
		err    error
	}
	got := make(chan locked, 1)
	go func() {
		u, w, err := s2.Lock(ctx, [][]byte{p})
		got <- locked{u, w, err}
	}()
	waitLockKeys(t, s1, p, 2) // s2 has queued its key
	select {
	case l := <-got:
		t.Fatalf("the second store took a held lock (err %v)", l.err)
	default:
	}
	unlock1()
	unlock1() // idempotent
	l := <-got
	require.NoError(t, l.err)
	require.True(t, l.waited)
	n, _ = lockKeys(t, s1, p)
	require.EqualValues(t, 1, n)
	l.unlock()
	n, _ = lockKeys(t, s1, p)
	require.EqualValues(t, 0, n)
}

// Goroutines of two stores taking overlapping sets of locks, in any
// order, never find another inside, and never deadlock.
func TestLockExcludesGoroutines(t *testing.T) {
	s1 := etcdkv.OpenForTest(t, etcdkv.Config{})
	s2 := etcdkv.OpenForTest(t, etcdkv.Config{Namespace: s1.Namespace()})
	a, b := engine.LockPrefix(docKey("a", 1)), engine.LockPrefix(docKey("b", 1))
	sets := [][][]byte{{a}, {b, a}, {a, b}, {a, a}}
	var inside [2]atomic.Int32 // holders of a, of b
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		s := []*etcdkv.Store{s1, s2}[g%2]
		set := sets[g%len(sets)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				unlock, _, err := s.Lock(context.Background(), set)
				if err != nil {
					errs <- err
					return
				}
				var mine []int
				for _, p := range set {
					i := 0
					if string(p) == string(b) {
						i = 1
					}
					if !containsInt(mine, i) {
						mine = append(mine, i)
					}
				}
				for _, i := range mine {
					if n := inside[i].Add(1); n != 1 {
						t.Errorf("%d holders of one lock", n)
					}
				}
				for _, i := range mine {
					inside[i].Add(-1)
				}
				unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, p := range [][]byte{a, b} {
		n, _ := lockKeys(t, s1, p)
		require.EqualValues(t, 0, n)
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// A batch told Hold fails, naming the condition's key, while another
// store holds the lock of the key's prefix; the holder's own batch, which
// holds it, passes; a condition on another prefix passes; a batch never
// told Hold checks nothing; and once unlocked, Hold(nil) passes.
func TestHoldGivesWayToTheLockHolder(t *testing.T) {
	holder := etcdkv.OpenForTest(t, etcdkv.Config{})
	other := etcdkv.OpenForTest(t, etcdkv.Config{Namespace: holder.Namespace()})
	key, next := docKey("alice", 1), docKey("alice", 2)
	p := engine.LockPrefix(key)
	unlock, _, err := holder.Lock(context.Background(), [][]byte{p})
	require.NoError(t, err)

	put := func(s *etcdkv.Store, held [][]byte, c engine.Cond, k []byte) error {
		return apply(t, s, func(b engine.Batch) {
			if held != nil {
				b.(engine.LockHolding).Hold(held)
			}
			require.NoError(t, b.Require(c))
			require.NoError(t, b.Set(k, []byte("v")))
		})
	}
	err = put(other, [][]byte{}, engine.Absent(key), key)
	require.ErrorIs(t, err, engine.ErrConditionFailed)
	var ce *engine.ConditionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, [][]byte{key}, ce.Keys)
	require.False(t, has(t, other, key), "a failed lock check writes nothing")

	// Without writes the txn has no probe: every condition is named.
	err = apply(t, other, func(b engine.Batch) {
		b.(engine.LockHolding).Hold(nil)
		require.NoError(t, b.Require(engine.Absent(key)))
	})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, [][]byte{key}, ce.Keys)

	bob := docKey("bob", 1)
	require.NoError(t, put(other, [][]byte{}, engine.Absent(bob), bob), "another prefix")
	require.NoError(t, put(holder, [][]byte{p}, engine.Absent(key), key), "the holder")
	require.NoError(t, put(other, nil, engine.Absent(next), next), "a batch never told Hold")

	unlock()
	require.NoError(t, put(other, [][]byte{}, engine.Present(key), key), "after unlock")
}

// Close cuts short a Lock waiting on the cluster and one waiting in
// memory behind a goroutine of the same store; both fail with ErrClosed,
// the holder's unlock after Close is harmless, and the revoked lease took
// the store's keys.
func TestCloseCutsLockShort(t *testing.T) {
	holder := etcdkv.OpenForTest(t, etcdkv.Config{})
	s := etcdkv.OpenForTest(t, etcdkv.Config{Namespace: holder.Namespace()})
	p, q := engine.LockPrefix(docKey("p", 1)), engine.LockPrefix(docKey("q", 1))
	ctx := context.Background()
	unlockP, _, err := holder.Lock(ctx, [][]byte{p})
	require.NoError(t, err)
	defer unlockP()
	unlockQ, _, err := s.Lock(ctx, [][]byte{q})
	require.NoError(t, err)

	errs := make(chan error, 2)
	go func() {
		_, _, err := s.Lock(ctx, [][]byte{p})
		errs <- err
	}()
	go func() {
		_, _, err := s.Lock(ctx, [][]byte{q})
		errs <- err
	}()
	waitLockKeys(t, holder, p, 2) // s waits on the cluster
	require.NoError(t, s.Close())
	for range 2 {
		require.ErrorIs(t, <-errs, engine.ErrClosed)
	}
	unlockQ()
	for _, pr := range [][]byte{p, q} {
		n, _ := lockKeys(t, holder, pr)
		want := int64(0)
		if string(pr) == string(p) {
			want = 1 // the holder's
		}
		require.EqualValues(t, want, n, "lock keys of %x", pr)
	}
}

// Lock keys lie in the store's namespace (an etcdctl del --prefix of it
// takes them) but outside codec.Keyspace: no iterator of the store meets
// them, nor a snapshot's.
func TestLockKeysInvisible(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{})
	key := docKey("alice", 1)
	set(t, s, key, []byte("v"))
	unlock, _, err := s.Lock(context.Background(), [][]byte{engine.LockPrefix(key), {0x00}, {0xff, 0xff}})
	require.NoError(t, err)
	defer unlock()

	resp, err := s.Client().Get(context.Background(), s.Namespace(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, 4, resp.Count, "the document and three lock keys in the namespace")

	lo, hi := codec.Keyspace()
	require.Equal(t, 1, count(t, s, lo, hi))
	sn, err := s.NewSnapshot()
	require.NoError(t, err)
	defer sn.Close()
	require.Equal(t, 1, count(t, sn, lo, hi))
	require.Equal(t, 1, count(t, s, []byte{0x00}, []byte{0xff}))
}

// Lock checks take what room the batch's own conditions leave under
// MaxTxnOps: a batch with MaxTxnOps conditions has none, checks no lock
// and commits on its conditions alone (the locks are advisory); with one
// condition fewer it checks the lock and gives way.
func TestHoldWithoutRoomChecksNothing(t *testing.T) {
	holder := etcdkv.OpenForTest(t, etcdkv.Config{})
	other := etcdkv.OpenForTest(t, etcdkv.Config{Namespace: holder.Namespace(), MaxTxnOps: 3})
	p := engine.LockPrefix(docKey("alice", 1))
	unlock, _, err := holder.Lock(context.Background(), [][]byte{p})
	require.NoError(t, err)
	defer unlock()
	put := func(conds int, k []byte) error {
		return apply(t, other, func(b engine.Batch) {
			b.(engine.LockHolding).Hold(nil)
			for v := range conds {
				require.NoError(t, b.Require(engine.Absent(docKey("alice", int64(10+v)))))
			}
			require.NoError(t, b.Set(k, []byte("v")))
		})
	}
	require.ErrorIs(t, put(2, docKey("alice", 1)), engine.ErrConditionFailed, "room for the check")
	require.NoError(t, put(3, docKey("alice", 2)), "no room")
}
