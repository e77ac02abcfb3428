package enginetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
)

// lockerOf returns s as an engine.Locker that can lock, or skips the test:
// prefix locks are optional (an exclusive engine's writers never collide
// across processes, and a dialect may have no locks).
func lockerOf(t *testing.T, s engine.Store) engine.Locker {
	t.Helper()
	lk, ok := s.(engine.Locker)
	if !ok {
		t.Skip("the engine has no prefix locks (engine.Locker)")
	}
	unlock, _, err := lk.Lock(context.Background(), [][]byte{engine.LockPrefix(vkey("probe", "x", 1))})
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("the engine cannot lock here:", err)
	}
	require.NoError(t, err)
	unlock()
	return lk
}

// lock takes the lock of p on lk and returns its unlock, which the test's
// end calls too if the test has not (a store's Close may wait for its
// locks).
func lock(t *testing.T, lk engine.Locker, p []byte) func() {
	t.Helper()
	unlock, _, err := lk.Lock(context.Background(), [][]byte{p})
	require.NoError(t, err)
	once := sync.OnceFunc(unlock)
	t.Cleanup(once)
	return once
}

// Lock excludes across handles: a second handle's Lock of the same prefix
// returns only once the first unlocks; another prefix is not held up. A
// Close cuts a waiting Lock short.
func testLockExcludes(t *testing.T, h Harness) {
	if h.Second == nil {
		t.Skip("no second handle: an exclusive engine")
	}
	a := open(t, h)
	lka := lockerOf(t, a)
	b := h.Second(t, a)
	lkb, ok := b.(engine.Locker)
	require.True(t, ok, "both handles of an engine lock")
	p, q := prefix("docs", "hot"), prefix("docs", "cold")

	unlockA := lock(t, lka, p)
	unlockQ, _, err := lkb.Lock(context.Background(), [][]byte{q})
	require.NoError(t, err, "another prefix is free")
	unlockQ()

	// b's Lock returns only after a's unlock, so it reads what a wrote
	// last under the lock.
	k := vkey("docs", "hot", 1)
	set(t, a, k, []byte("held"))
	got := make(chan string, 1)
	go func() {
		unlockB, _, err := lkb.Lock(context.Background(), [][]byte{p})
		if err != nil {
			t.Error(err)
			got <- ""
			return
		}
		v, err := b.Get(k)
		unlockB()
		if err != nil {
			t.Error(err)
		}
		got <- string(v)
	}()
	set(t, a, k, []byte("released"))
	unlockA()
	require.Equal(t, "released", <-got, "the second handle took the lock after the first let go")

	// Close cuts a wait short.
	lock(t, lka, p)
	c := h.Second(t, a)
	lkc := c.(engine.Locker)
	done := make(chan error, 1)
	go func() {
		_, _, err := lkc.Lock(context.Background(), [][]byte{p})
		done <- err
	}()
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-done, engine.ErrClosed)
}

// A batch that says which locks its writer holds (engine.LockHolding)
// gives way to another writer's lock: its condition on a key under a
// prefix locked elsewhere fails, naming the key, while the holder's own
// batch commits, and once the lock is released it commits too. A batch
// never told Hold is not held up.
func testLockHolding(t *testing.T, h Harness) {
	if h.Second == nil {
		t.Skip("no second handle: an exclusive engine")
	}
	a := open(t, h)
	lka := lockerOf(t, a)
	b := h.Second(t, a)
	if _, ok := b.NewBatch().(engine.LockHolding); !ok {
		t.Skip("the engine's batches do not implement engine.LockHolding")
	}
	p := prefix("docs", "hot")
	k1, k2 := vkey("docs", "hot", 1), vkey("docs", "hot", 2)
	set(t, a, k1, []byte("v1"))

	write := func(s engine.Store, hold [][]byte, k []byte) error {
		return apply(t, s, func(bt engine.Batch) {
			if hold != nil {
				bt.(engine.LockHolding).Hold(hold)
			}
			require.NoError(t, bt.Require(engine.Present(k1)))
			require.NoError(t, bt.Set(k, []byte("x")))
		})
	}

	unlock := lock(t, lka, p)
	err := write(b, [][]byte{}, k2)
	var ce *engine.ConditionError
	require.ErrorAs(t, err, &ce, "a writer without the lock gives way to its holder")
	require.ErrorIs(t, err, engine.ErrConditionFailed)
	require.Contains(t, ce.Keys, k1, "the failure names the condition's key, whose lock to ask for")
	_, err = b.Get(k2)
	require.ErrorIs(t, err, engine.ErrNotFound, "nothing was written")

	require.NoError(t, write(b, nil, k2), "a batch never told Hold is not held up")
	require.NoError(t, write(a, [][]byte{p}, k2), "the holder's batch commits")
	unlock()
	require.NoError(t, write(b, [][]byte{}, k2), "once released, nobody is held up")
}
