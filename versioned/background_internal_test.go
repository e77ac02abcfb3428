package versioned

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
)

// One background job per key and DB: handles made per request start no
// goroutine of their own. Close stops the job and waits for it.
func TestBackgroundJobPerKey(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	ran := make(chan struct{}, 1)
	require.NoError(t, background(db, "k", time.Hour, "test pass", func(context.Context) ([]slog.Attr, error) {
		ran <- struct{}{}
		return nil, nil
	}))
	for range 3 {
		require.NoError(t, background(db, "k", time.Hour, "test pass", func(context.Context) ([]slog.Attr, error) {
			t.Error("a second job with the same key ran")
			return nil, nil
		}))
	}
	<-ran // the first pass comes at once
	other := make(chan struct{}, 1)
	require.NoError(t, background(db, "other", time.Hour, "test pass", func(context.Context) ([]slog.Attr, error) {
		other <- struct{}{}
		return nil, nil
	}))
	<-other
	require.NoError(t, db.Close())

	// Handles on one collection with a TTL share its purge job.
	db = openTTL(t)
	for range 10 {
		_, err := NewCollection[string](db, "c", &Options[string]{TTL: time.Minute})
		require.NoError(t, err)
	}
	require.NoError(t, background(db, purgeKey{"c"}, time.Hour, "test pass", func(context.Context) ([]slog.Attr, error) {
		t.Error("the collection's purge job was not registered under its key")
		return nil, nil
	}))
}

func openTTL(t *testing.T) *tipkv.DB {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
