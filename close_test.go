package tipkv_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Close while every kind of call runs in other goroutines: document Puts
// and reads, History iteration, feed Appends, Enqueue, Receive and Ack, and
// goroutines blocked in Wait. Every call either succeeds or returns
// ErrClosed; nothing panics or hangs; afterwards no goroutine is left.
func TestCloseDuringConcurrentUse(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint("round=", round), func(t *testing.T) {
			before := runtime.NumGoroutine()
			closeDuringUse(t, time.Duration(round*3)*time.Millisecond)
			requireGoroutinesBack(t, before)
		})
	}
}

func closeDuringUse(t *testing.T, after time.Duration) {
	db, err := tipkv.Open(t.TempDir(), &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	docs, err := versioned.NewCollection[int](db, "docs", nil)
	require.NoError(t, err)
	feed, err := versioned.NewFeed[int](db, nil)
	require.NoError(t, err)
	waitQ, err := queue.Open[int](db, "never-filled", nil)
	require.NoError(t, err)
	q, err := queue.Open[int](db, "work", nil)
	require.NoError(t, err)
	for i := range 50 {
		_, err := docs.Put(db, "d", i)
		require.NoError(t, err)
	}

	workers := map[string]func(i int) error{
		"put":    func(i int) error { _, err := docs.Put(db, fmt.Sprint("d", i%7), i); return err },
		"latest": func(int) error { _, err := docs.Latest("d"); return err },
		"history": func(int) error {
			for _, err := range docs.History("d", tipkv.Query{}) {
				if err != nil {
					return err
				}
			}
			return nil
		},
		"append":  func(i int) error { _, err := feed.Append(db, "s", i); return err },
		"enqueue": func(i int) error { _, err := q.Enqueue(db, i, i+1); return err },
		"receive-ack": func(int) error {
			msgs, err := q.Receive(4, time.Minute)
			if err != nil {
				return err
			}
			ids := make([]queue.ID, len(msgs))
			for i, m := range msgs {
				ids[i] = m.ID
			}
			if len(ids) == 0 {
				return nil
			}
			return q.Ack(db, ids...)
		},
		"update": func(i int) error {
			return db.Update(func(b *tipkv.Batch) error {
				v, err := docs.Put(b, "o", i)
				if err != nil {
					return err
				}
				_, err = q.Enqueue(b, int(v))
				return err
			})
		},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for name, work := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if err := work(i); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- fmt.Errorf("wait: %w", waitQ.Wait(context.Background()))
		}()
	}
	time.Sleep(after)
	require.NoError(t, db.Close())

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("calls still blocked 10 s after Close")
	}
	close(errs)
	n := 0
	for err := range errs {
		n++
		require.True(t, errors.Is(err, tipkv.ErrClosed), "want ErrClosed, got %v", err)
	}
	require.Equal(t, len(workers)+3, n, "every worker must end with ErrClosed")

	// Use after Close.
	_, err = docs.Put(db, "d", 1)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = docs.Latest("d")
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = q.Enqueue(db, 1)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = q.Receive(1, time.Second)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	require.ErrorIs(t, waitQ.Wait(context.Background()), tipkv.ErrClosed)
	_, err = queue.Open[int](db, "other", nil)
	require.ErrorIs(t, err, tipkv.ErrClosed)
	_, err = versioned.NewCollection[int](db, "other", nil)
	if err != nil { // handles may be made lazily; their first use must fail
		require.ErrorIs(t, err, tipkv.ErrClosed)
	}
}

// requireGoroutinesBack waits a little for goroutines to finish, then
// fails if more are running than before.
func requireGoroutinesBack(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines before, %d after Close:\n%s", before, n, buf)
	}
}
