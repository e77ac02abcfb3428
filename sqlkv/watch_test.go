package sqlkv_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/sqlkv"
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
