package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

func openQ[T any](t testing.TB, db *tipkv.DB, name string, opts *queue.Options[T]) *queue.Queue[T] {
	t.Helper()
	q, err := queue.Open(db, name, opts)
	require.NoError(t, err)
	return q
}

// push enqueues vals through w in one call and returns the first one's
// sequence number.
func push[T any](t testing.TB, w tipkv.Writer, q *queue.Queue[T], vals ...T) int64 {
	t.Helper()
	first, err := q.Enqueue(w, vals...)
	require.NoError(t, err)
	return first
}

func values[T any](ms []queue.Message[T]) []T {
	out := make([]T, len(ms))
	for i, m := range ms {
		out[i] = m.Value
	}
	return out
}

func ids[T any](ms []queue.Message[T]) []queue.ID {
	out := make([]queue.ID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// mode is a kind of engine a queue runs on: Pebble (exclusive), or a
// shared store whose handles stand for processes, that watches or that
// waits poll.
type mode struct {
	name string
	// open returns n DB handles on one new store (1 for Pebble, whatever
	// n is).
	open func(t *testing.T, n int, opts *tipkv.Options) []*tipkv.DB
}

var modes = []mode{
	{"pebble", func(t *testing.T, _ int, opts *tipkv.Options) []*tipkv.DB {
		o := tipkv.Options{}
		if opts != nil {
			o = *opts
		}
		o.InMemory = true
		db, err := tipkv.Open("", &o)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return []*tipkv.DB{db}
	}},
	{"shared-watch", func(t *testing.T, n int, opts *tipkv.Options) []*tipkv.DB {
		return testutil.OpenShared(t, n, sharedstore.Options{}, opts)
	}},
	{"shared-poll", func(t *testing.T, n int, opts *tipkv.Options) []*tipkv.DB {
		return testutil.OpenShared(t, n, sharedstore.Options{NoWatch: true}, opts)
	}},
}

// inModes runs f once per mode.
func inModes(t *testing.T, f func(t *testing.T, m mode)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}
