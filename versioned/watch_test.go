package versioned_test

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// gatedStore holds the durability wait of synced commits while gate is
// set: their writes are visible and not yet durable.
type gatedStore struct {
	engine.Store
	gate    atomic.Pointer[chan struct{}]
	waiting chan struct{} // a commit entered the held wait
}

func (s *gatedStore) Close() error { return nil } // the base DB closes it

func (s *gatedStore) NewBatch() engine.Batch { return &gatedBatch{Batch: s.Store.NewBatch(), s: s} }

type gatedBatch struct {
	engine.Batch
	s    *gatedStore
	gate chan struct{}
}

func (b *gatedBatch) Apply(sync bool) error {
	if g := b.s.gate.Load(); g != nil && sync {
		b.gate = *g
	}
	return b.Batch.Apply(sync)
}

func (b *gatedBatch) Wait() error {
	if b.gate != nil {
		b.s.waiting <- struct{}{}
		<-b.gate
	}
	return b.Batch.Wait()
}

func openGated(t *testing.T) (*tipkv.DB, *gatedStore) {
	t.Helper()
	base := testutil.OpenMem(t)
	s, err := link.StoreOf(base)
	require.NoError(t, err)
	gs := &gatedStore{Store: s, waiting: make(chan struct{}, 16)}
	db, err := tipkv.OpenEngine(gs, "gated", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db, gs
}

// A version is delivered only once its commit is durable: not while its
// WAL sync is pending, even when a later version of the document (a NoSync
// write, here one whose wait is not held) is durable first; and a Watch
// that starts while a commit is pending waits for it.
func TestWatchDeliversOnlyDurableVersions(t *testing.T) {
	db, gs := openGated(t)
	users := newUsers(t, db)
	_, err := users.Put(db, "u", user{Name: "1"})
	require.NoError(t, err)

	sleeps := make(chan int, 64)
	var delivered atomic.Int64
	t.Cleanup(versioned.OnWatchSleep(func() { sleeps <- int(delivered.Load()) }))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan int64, 16)
	go func() {
		for ch, err := range users.Watch(ctx, "u", 0) {
			if err != nil {
				close(got)
				return
			}
			delivered.Add(1)
			got <- ch.Doc.Version
		}
	}()
	require.Equal(t, int64(1), <-got)
	require.Equal(t, 1, <-sleeps)

	// Version 2 is applied and its sync held.
	gate := make(chan struct{})
	gs.gate.Store(&gate)
	put2 := make(chan error, 1)
	go func() { _, err := users.Put(db, "u", user{Name: "2"}); put2 <- err }()
	<-gs.waiting
	gs.gate.Store(nil)
	d, err := users.Latest("u")
	require.NoError(t, err)
	require.Equal(t, int64(2), d.Version, "visible")
	// Version 3 commits in full and wakes the watcher, which reads 2 and 3
	// and delivers neither: 2 is not durable, and 3 comes after it.
	_, err = users.Put(db, "u", user{Name: "3"})
	require.NoError(t, err)
	require.Equal(t, 1, <-sleeps, "nothing delivered while version 2 is not durable")
	close(gate)
	require.NoError(t, <-put2)
	require.Equal(t, int64(2), <-got)
	require.Equal(t, int64(3), <-got)

	// A Watch that starts while a commit made before any Watch ran is
	// pending waits for it.
	cancel()
	for range got {
	}
	gate = make(chan struct{})
	gs.gate.Store(&gate)
	go func() { _, err := users.Put(db, "u", user{Name: "4"}); put2 <- err }()
	<-gs.waiting
	gs.gate.Store(nil)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	next, stop := iter.Pull2(users.Watch(ctx, "u", 3))
	defer stop()
	type pulled struct {
		ch  versioned.Change[user]
		err error
	}
	first := make(chan pulled, 1)
	go func() { ch, err, _ := next(); first <- pulled{ch, err} }()
	<-sleeps // it waits for the pending commit
	select {
	case p := <-first:
		t.Fatalf("delivered %+v before the commit was durable", p)
	default:
	}
	close(gate)
	p := <-first
	require.NoError(t, p.err)
	require.Equal(t, int64(4), p.ch.Doc.Version)
	require.NoError(t, <-put2)
}

// Watches end on their context and on Close, on Pebble and on shared
// engines with and without a watch, and leave no goroutine behind.
func TestWatchLeavesNoGoroutine(t *testing.T) {
	for _, mode := range []string{"pebble", "shared-watch", "shared-poll"} {
		t.Run(mode, func(t *testing.T) {
			before := runtime.NumGoroutine()
			var db *tipkv.DB
			switch mode {
			case "pebble":
				db = testutil.OpenMem(t)
			case "shared-watch":
				db = testutil.OpenShared(t, 1, sharedstore.Options{}, nil)[0]
			default:
				db = testutil.OpenShared(t, 1, sharedstore.Options{NoWatch: true}, nil)[0]
			}
			users := newUsers(t, db)
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			errs := make(chan error, 8)
			started := make(chan struct{}, 8)
			for i := range 8 {
				wctx := context.Background()
				if i%2 == 0 {
					wctx = ctx
				}
				id := fmt.Sprint("d", i%3)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, err := range users.Watch(wctx, id, 0) {
						if err != nil {
							errs <- err
							return
						}
						started <- struct{}{}
					}
				}()
			}
			for i := range 3 {
				_, err := users.Put(db, fmt.Sprint("d", i), user{})
				require.NoError(t, err)
			}
			for range 8 {
				<-started
			}
			cancel()
			for range 4 {
				require.ErrorIs(t, <-errs, context.Canceled)
			}
			require.NoError(t, db.Close())
			for range 4 {
				require.ErrorIs(t, <-errs, tipkv.ErrClosed)
			}
			wg.Wait()
			deadline := time.Now().Add(10 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				runtime.Gosched()
				time.Sleep(time.Millisecond)
			}
			require.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left behind")
		})
	}
}
