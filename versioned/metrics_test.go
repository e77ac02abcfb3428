package versioned_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// DB.Metrics counts the versions each collection wrote and removed in this
// process, over every handle on it; an Update that fails counts nothing.
func TestCollectionMetrics(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	defer db.Close()
	pages, err := versioned.NewCollection[string](db, "pages", nil)
	require.NoError(t, err)
	again, err := versioned.NewCollection[string](db, "pages", nil)
	require.NoError(t, err)
	kept, err := versioned.NewCollection[string](db, "kept", &versioned.Options[string]{KeepVersions: 2})
	require.NoError(t, err)

	for _, s := range []string{"a", "b", "c"} {
		_, err := pages.Put(db, "home", s)
		require.NoError(t, err)
	}
	_, err = again.Put(db, "about", "x")
	require.NoError(t, err)
	_, err = pages.Delete(db, "home") // a marker is a version written
	require.NoError(t, err)
	_, err = pages.Delete(db, "missing") // writes nothing
	require.NoError(t, err)
	n, err := pages.Prune(db, "home", 2) // drops 1 and 2
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	boom := errors.New("boom")
	require.ErrorIs(t, db.Update(func(b *tipkv.Batch) error {
		if _, err := pages.Put(b, "home", "lost"); err != nil {
			return err
		}
		return boom
	}), boom)
	for i := range 5 {
		_, err := kept.Put(db, "k", string(rune('a'+i)))
		require.NoError(t, err)
	}

	m, err := db.Metrics()
	require.NoError(t, err)
	require.Equal(t, []tipkv.CollectionMetrics{
		{Name: "kept", Writes: 5, Removed: 3},
		{Name: "pages", Writes: 5, Removed: 2},
	}, m.Collections)
}

// DB.Metrics counts the feed events this process appended (an Update that
// fails counts nothing) and the retention passes, with what they dropped.
func TestFeedAndRetentionMetrics(t *testing.T) {
	clock := testutil.NewClock(t0)
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, Clock: clock.Now})
	require.NoError(t, err)
	defer db.Close()
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{
		Retention: versioned.FeedRetention{MaxEvents: 1, Interval: -1},
	})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		for range 3 {
			if _, err := f.Append(b, "s", click{}); err != nil {
				return err
			}
		}
		return nil
	}))
	boom := errors.New("boom")
	require.ErrorIs(t, db.Update(func(b *tipkv.Batch) error {
		if _, err := f.Append(b, "s", click{}); err != nil {
			return err
		}
		return boom
	}), boom)
	_, err = f.Append(db, "t", click{})
	require.NoError(t, err)
	for range 2 {
		_, err := f.Retain(context.Background())
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = f.Retain(ctx)
	require.ErrorIs(t, err, context.Canceled)

	c, err := versioned.NewCollection[string](db, "sessions", &versioned.Options[string]{TTL: time.Minute, PurgeInterval: -1})
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		_, err := c.Put(db, id, "x")
		require.NoError(t, err)
	}
	clock.Set(t0.Add(time.Hour))
	_, err = c.PurgeExpired(context.Background())
	require.NoError(t, err)

	m, err := db.Metrics()
	require.NoError(t, err)
	require.Equal(t, tipkv.FeedMetrics{Appends: 4, Retentions: []tipkv.FeedRetentionMetrics{{Streams: ""}}}, m.Feeds,
		"a completed pass reports the stale groups of its retention")
	require.Equal(t, tipkv.RetentionMetrics{FeedPasses: 3, StreamsTrimmed: 1, PurgePasses: 1, DocumentsPurged: 2}, m.Retention,
		"a cancelled pass is a pass, not a failure")
}
