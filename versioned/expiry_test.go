package versioned_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// A manual PurgeExpired that found a document expired does not purge it
// after another pass (the background purger's, or another process's)
// purged it and a Put wrote it again as version 1, the number the expired
// version had: the pass checks what is stored when it purges. The other
// pass and the Put run when the first pass's walk closes its iterator,
// before its purges.
func TestPurgeExpiredKeepsDocumentPurgedAndWrittenAgain(t *testing.T) {
	const ttl = time.Minute
	for _, shared := range []bool{false, true} {
		name := "exclusive"
		if shared {
			name = "shared"
		}
		t.Run(name, func(t *testing.T) {
			clock := testutil.NewClock(t0)
			opts := &tipkv.Options{Clock: clock.Now}
			var db, db2 *tipkv.DB
			if shared {
				dbs := testutil.OpenShared(t, 2, sharedstore.Options{}, opts)
				db, db2 = dbs[0], dbs[1]
			} else {
				db, _ = testutil.OpenDir(t, opts)
				db2 = db
			}
			coll := func(db *tipkv.DB) *versioned.Collection[user] {
				c, err := versioned.NewCollection[user](db, "sessions", &versioned.Options[user]{TTL: ttl, PurgeInterval: -1})
				require.NoError(t, err)
				return c
			}
			c, c2 := coll(db), coll(db2)
			_, err := c.Put(db, "a", user{Name: "old"})
			require.NoError(t, err)
			clock.Set(t0.Add(ttl))

			var armed atomic.Bool
			armed.Store(true)
			defer versioned.WrapIters(func(it engine.Iter) engine.Iter {
				return &closeHook{Iter: it, f: func() {
					if !armed.CompareAndSwap(true, false) {
						return
					}
					st, err := c2.PurgeExpired(context.Background())
					require.NoError(t, err)
					require.Equal(t, 1, st.Purged)
					v, err := c2.Put(db2, "a", user{Name: "new"})
					require.NoError(t, err)
					require.EqualValues(t, 1, v)
				}}
			})()
			st, err := c.PurgeExpired(context.Background())
			require.NoError(t, err)
			require.False(t, armed.Load(), "the pass opened no iterator")
			require.Zero(t, st.Purged)
			d, err := c.Latest("a")
			require.NoError(t, err, "written again after the purge, it expires at %v", t0.Add(2*ttl))
			require.Equal(t, "new", d.Value.Name)
		})
	}
}

// closeHook calls f after its iterator is closed.
type closeHook struct {
	engine.Iter
	f func()
}

func (it *closeHook) Close() error {
	err := it.Iter.Close()
	it.f()
	return err
}

// History skips expired versions however many come first: one seek, then
// one step per version. It sought its first key again after each expired
// version at the start of a history, so the History of a document whose
// newest version had expired never returned.
func TestHistorySkipsExpiredNewestVersions(t *testing.T) {
	clock := testutil.NewClock(t0)
	db, _ := testutil.OpenDir(t, &tipkv.Options{Clock: clock.Now})
	c, err := versioned.NewCollection[string](db, "sessions", &versioned.Options[string]{TTL: time.Hour, PurgeInterval: -1})
	require.NoError(t, err)
	plain, err := versioned.NewCollection[string](db, "sessions", nil)
	require.NoError(t, err)
	_, err = plain.Put(db, "a", "kept") // version 1, no expiry
	require.NoError(t, err)
	for _, s := range []string{"old", "older"} {
		_, err = c.Put(db, "a", s) // versions 2 and 3, expire at t0+1h
		require.NoError(t, err)
	}
	clock.Set(t0.Add(time.Hour))

	var sc seekCounter
	defer versioned.WrapIters(func(it engine.Iter) engine.Iter { return &seekGuard{Iter: sc.wrap(it)} })()
	for _, q := range []tipkv.Query{{}, {Limit: 1}} {
		sc.seeks.Store(0)
		var got []int64
		for d, err := range c.History("a", q) {
			require.NoError(t, err)
			got = append(got, d.Version)
		}
		require.Equal(t, []int64{1}, got, "%+v: the version without expiry, after the two expired", q)
		require.EqualValues(t, 1, sc.seeks.Load(), "%+v: one seek", q)
	}
}

// seekGuard panics when its iterator seeks without end, so that a read
// that loops fails instead of hanging.
type seekGuard struct {
	engine.Iter
	seeks int
}

func (it *seekGuard) SeekGE(key []byte) bool {
	if it.seeks++; it.seeks > 1000 {
		panic("an iterator sought 1000 times")
	}
	return it.Iter.SeekGE(key)
}
