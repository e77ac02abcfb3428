package sqlkv_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/versioned"
)

// A write from another store (another process) to a queue's state key
// wakes a watch of that key by notification, as does a range delete over
// it.
func TestWatchByNotification(t *testing.T) {
	s := openStore(t, sqlkv.Config{})
	w := second(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := stateKey("jobs")
	ch, err := s.Watch(ctx, k, codec.PrefixEnd(k))
	require.NoError(t, err)
	other, err := s.Watch(ctx, stateKey("other"), codec.PrefixEnd(stateKey("other")))
	require.NoError(t, err)

	mustSet(t, w, k, []byte("tail 1"), qkey("jobs", 1), []byte("item"))
	_, ok := <-ch
	require.True(t, ok)
	require.NoError(t, apply(w, func(b engine.Batch) { _ = b.DeleteRange(stateKey("a"), stateKey("z")) }))
	_, ok = <-ch
	require.True(t, ok, "a range delete over the key wakes it")
	_, ok = <-other
	require.True(t, ok, "and the other watch in its range")

	// Writes outside the notified families send nothing: the watch of
	// "other" hears only the write to its own key, which comes last.
	mustSet(t, w, qkey("other", 1), []byte("item"))
	mustSet(t, w, stateKey("other"), []byte("tail"))
	_, ok = <-other
	require.True(t, ok)

	cancel()
	for range ch { // closed when ctx ends
	}
}

// A watch outside the notified families, and every watch of a store with
// NoWatch, wakes by polling.
func TestWatchPolls(t *testing.T) {
	for _, cfg := range []sqlkv.Config{{PollInterval: time.Millisecond}, {NoWatch: true, PollInterval: time.Millisecond}} {
		s := openStore(t, cfg)
		require.Equal(t, !cfg.NoWatch, s.Caps().Watch)
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := s.Watch(ctx, qprefix("q"), codec.PrefixEnd(qprefix("q")))
		require.NoError(t, err)
		_, ok := <-ch
		require.True(t, ok)
		cancel()
		for range ch {
		}
	}
}

// When the listening connection breaks, every watch on it closes (the
// caller reads again and watches again); a new Watch listens again.
func TestWatchBreaks(t *testing.T) {
	ownServer(t)
	s := openStore(t, sqlkv.Config{})
	ctx := context.Background()
	k := stateKey("jobs")
	ch, err := s.Watch(ctx, k, codec.PrefixEnd(k))
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'")
	require.NoError(t, err)
	for range ch {
	}
	ch, err = s.Watch(ctx, k, codec.PrefixEnd(k))
	require.NoError(t, err)
	mustSet(t, second(t, s), k, []byte("tail"))
	_, ok := <-ch
	require.True(t, ok)
}

// A Watch whose context ends at once (a Wait with a deadline of a
// millisecond) still opens the listening connection, which serves every
// watch of the store, under a timeout of its own: the caller's deadline
// ends its watch, not the connection. Before, the connection's dial took
// the caller's deadline and failed with an i/o timeout.
func TestWatchShortDeadline(t *testing.T) {
	s := openStore(t, sqlkv.Config{})
	k := stateKey("jobs")
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
		ch, err := s.Watch(ctx, k, codec.PrefixEnd(k))
		require.NoError(t, err)
		for range ch { // closed when ctx ends
		}
		cancel()
	}
	ch, err := s.Watch(context.Background(), k, codec.PrefixEnd(k))
	require.NoError(t, err)
	mustSet(t, second(t, s), k, []byte("tail"))
	_, ok := <-ch
	require.True(t, ok)
}

// By default a feed's Follow, a document's Watch and a queue's Wait on one
// DB are woken by another DB's (another process's) Append, Put and Enqueue
// through notification: here polling is set to an hour, so only a
// notification can end each wait. Until the default named every family a
// follower waits on, Follow and Watch here waited for the poll.
func TestFollowersWokenByNotification(t *testing.T) {
	cfg := sqlkv.Config{DSN: dsn(t), Table: newTable(t), PollInterval: time.Hour}
	writer, err := sqlkv.Open(context.Background(), cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = writer.Close() })
	fs, err := sqlkv.NewStore(context.Background(), cfg)
	require.NoError(t, err)
	follower, err := tipkv.OpenEngine(fs, fs.Name(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = follower.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang, not a timing
	defer cancel()

	wf, err := versioned.NewFeed[string](writer, nil)
	require.NoError(t, err)
	ff, err := versioned.NewFeed[string](follower, nil)
	require.NoError(t, err)
	wd, err := versioned.NewCollection[string](writer, "docs", nil)
	require.NoError(t, err)
	fd, err := versioned.NewCollection[string](follower, "docs", nil)
	require.NoError(t, err)
	wq, err := queue.Open[string](writer, "jobs", nil)
	require.NoError(t, err)
	fq, err := queue.Open[string](follower, "jobs", nil)
	require.NoError(t, err)

	woke := make(chan string, 3)
	asleep := func() {
		// Each follower's first read finds nothing; then it waits on a
		// registered watch.
		for n := 0; n < 3; n = sqlkv.NotifyWatches(fs) {
			if ctx.Err() != nil {
				t.Fatalf("%d of 3 followers wait for notifications", n)
			}
			time.Sleep(time.Millisecond) // waiting for the event, not for a time
		}
	}
	go func() {
		for e, err := range ff.Follow(ctx, "s", 0) {
			if err == nil {
				woke <- "follow " + e.Value
			}
			return
		}
	}()
	go func() {
		for c, err := range fd.Watch(ctx, "d", 0) {
			if err == nil {
				woke <- "watch " + c.Doc.Value
			}
			return
		}
	}()
	go func() {
		ms, err := fq.ReceiveWait(ctx, 1, time.Minute)
		if err == nil && len(ms) == 1 {
			woke <- "wait " + ms[0].Value
		}
	}()
	asleep()
	_, err = wf.Append(writer, "s", "e1")
	require.NoError(t, err)
	_, err = wd.Put(writer, "d", "v1")
	require.NoError(t, err)
	_, err = wq.Enqueue(writer, "m1")
	require.NoError(t, err)
	var got []string
	for range 3 {
		select {
		case s := <-woke:
			got = append(got, s)
		case <-ctx.Done():
			t.Fatalf("woken: %v; the others still wait", got)
		}
	}
	require.ElementsMatch(t, []string{"follow e1", "watch v1", "wait m1"}, got)
}
