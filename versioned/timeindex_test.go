package versioned_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/check"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// indexedUsers opens a DB (on a shared engine when shared) whose clock is
// the returned one, and the collection "users" with its time index on.
func indexedUsers(t *testing.T, shared bool) (*tipkv.DB, *versioned.Collection[user], *testutil.Clock) {
	t.Helper()
	clock := testutil.NewClock(t0)
	opts := &tipkv.Options{InMemory: true, Clock: clock.Now}
	var db *tipkv.DB
	if shared {
		db = testutil.OpenShared(t, 1, sharedstore.Options{}, &tipkv.Options{Clock: clock.Now})[0]
	} else {
		var err error
		db, err = tipkv.Open("", opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
	}
	c, err := versioned.NewCollection[user](db, "users", nil)
	require.NoError(t, err)
	require.NoError(t, c.EnableTimeIndex(context.Background()))
	return db, c, clock
}

// requireHealthy runs the store checker, which requires every index
// entry to name a stored version with its time and, for an index that is
// on, every timed version to have its entry.
func requireHealthy(t *testing.T, db *tipkv.DB) {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	require.NoError(t, check.Store(s, check.Options{FormatVersion: tipkv.FormatVersion}).Err())
}

// indexEntries returns the number of time index entries (the state key
// aside) in the store.
func indexEntries(t *testing.T, db *tipkv.DB) int {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	it, err := s.NewIter([]byte{byte(codec.FamilyTimeIndex)}, []byte{byte(codec.FamilyTimeIndex) + 1})
	require.NoError(t, err)
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	require.NoError(t, it.Error())
	if n > 0 {
		n-- // the state key
	}
	return n
}

// Every write and drop path keeps the index exact: after each, the
// checker finds an entry for every version and no entry without one, and
// reads by time answer from it. Each case fails when its path's index
// update is removed (the checker reports the missing or stale entry).
func TestTimeIndexWritePaths(t *testing.T) {
	type env struct {
		db    *tipkv.DB
		c     *versioned.Collection[user]
		clock *testutil.Clock
	}
	put := func(t *testing.T, e env, id string, n int) {
		for range n {
			e.clock.Advance(time.Second)
			_, err := e.c.Put(e.db, id, user{Name: id})
			require.NoError(t, err)
		}
	}
	cases := []struct {
		name string
		run  func(t *testing.T, e env)
		// entries is the number of index entries after run.
		entries int
	}{
		{"Put", func(t *testing.T, e env) { put(t, e, "a", 3) }, 3},
		{"PutIf", func(t *testing.T, e env) {
			put(t, e, "a", 1)
			_, err := e.c.PutIf(e.db, "a", user{Name: "b"}, 1)
			require.NoError(t, err)
			_, err = e.c.PutIf(e.db, "a", user{Name: "c"}, 1)
			require.ErrorIs(t, err, tipkv.ErrConflict)
		}, 2},
		{"Delete", func(t *testing.T, e env) {
			put(t, e, "a", 1)
			e.clock.Advance(time.Second)
			v, err := e.c.Delete(e.db, "a")
			require.NoError(t, err)
			require.EqualValues(t, 2, v)
		}, 2},
		{"DeleteIf", func(t *testing.T, e env) {
			put(t, e, "a", 2)
			_, err := e.c.DeleteIf(e.db, "a", 2)
			require.NoError(t, err)
		}, 3},
		{"Revert", func(t *testing.T, e env) {
			put(t, e, "a", 3)
			_, err := e.c.Revert(e.db, "a", 1, tipkv.Metadata{})
			require.NoError(t, err)
		}, 4},
		{"Undelete", func(t *testing.T, e env) {
			put(t, e, "a", 2)
			_, err := e.c.Delete(e.db, "a")
			require.NoError(t, err)
			_, err = e.c.Undelete(e.db, "a", tipkv.Metadata{})
			require.NoError(t, err)
		}, 4},
		{"Prune", func(t *testing.T, e env) {
			put(t, e, "a", 5)
			n, err := e.c.Prune(e.db, "a", 2)
			require.NoError(t, err)
			require.EqualValues(t, 3, n)
		}, 2},
		{"PruneMany", func(t *testing.T, e env) { // one range delete
			put(t, e, "a", 40)
			_, err := e.c.Prune(e.db, "a", 1)
			require.NoError(t, err)
		}, 1},
		{"PruneBefore", func(t *testing.T, e env) {
			put(t, e, "a", 5)
			_, err := e.c.PruneBefore(e.db, "a", 4)
			require.NoError(t, err)
		}, 2},
		{"Purge", func(t *testing.T, e env) {
			put(t, e, "a", 3)
			put(t, e, "b", 1)
			_, err := e.c.Purge(e.db, "a")
			require.NoError(t, err)
		}, 1},
		{"KeepVersions", func(t *testing.T, e env) {
			k, err := versioned.NewCollection[user](e.db, "users", &versioned.Options[user]{KeepVersions: 2})
			require.NoError(t, err)
			for range 5 {
				e.clock.Advance(time.Second)
				_, err := k.Put(e.db, "a", user{})
				require.NoError(t, err)
			}
			e.clock.Advance(time.Second)
			_, err = k.Delete(e.db, "a")
			require.NoError(t, err)
		}, 2},
		{"KeepVersionsInOneUpdate", func(t *testing.T, e env) {
			// The versions dropped were written by the same Update: their
			// times come from the Tx, not the store.
			k, err := versioned.NewCollection[user](e.db, "users", &versioned.Options[user]{KeepVersions: 1})
			require.NoError(t, err)
			require.NoError(t, e.db.Update(func(b *tipkv.Batch) error {
				for range 4 {
					if _, err := k.Put(b, "a", user{}); err != nil {
						return err
					}
				}
				return nil
			}))
		}, 1},
		{"PurgeThenPutInOneUpdate", func(t *testing.T, e env) {
			put(t, e, "a", 3)
			e.clock.Advance(time.Second)
			require.NoError(t, e.db.Update(func(b *tipkv.Batch) error {
				if _, err := e.c.Purge(b, "a"); err != nil {
					return err
				}
				_, err := e.c.Put(b, "a", user{})
				return err
			}))
		}, 1},
		{"PurgeExpired", func(t *testing.T, e env) {
			k, err := versioned.NewCollection[user](e.db, "users", &versioned.Options[user]{TTL: time.Minute, PurgeInterval: -1})
			require.NoError(t, err)
			for _, id := range []string{"a", "b"} {
				_, err := k.Put(e.db, id, user{})
				require.NoError(t, err)
			}
			put(t, e, "c", 1)
			e.clock.Advance(2 * time.Minute)
			st, err := k.PurgeExpired(context.Background())
			require.NoError(t, err)
			require.Equal(t, 2, st.Purged)
		}, 1},
	}
	for _, shared := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("shared=%v/%s", shared, tc.name), func(t *testing.T) {
				db, c, clock := indexedUsers(t, shared)
				e := env{db, c, clock}
				tc.run(t, e)
				requireHealthy(t, db)
				require.Equal(t, tc.entries, indexEntries(t, db))
				// Every version answers AsOfTime at its own time, by the
				// index, as by the search.
				for _, id := range []string{"a", "b", "c"} {
					for d, err := range c.History(id, tipkv.Query{}) {
						require.NoError(t, err)
						got, err := c.AsOfTime(id, d.Time)
						if d.Deleted {
							require.ErrorIs(t, err, tipkv.ErrNotFound)
							continue
						}
						require.NoError(t, err)
						require.Equal(t, d.Version, got.Version)
					}
				}
			})
		}
	}
}

// AsOfTime with the index is two seeks and a step, whatever the history's
// length, where the search grows with it; the answers are the same at
// every time, before, between and after the versions, with the index on,
// building and off.
func TestTimeIndexAnswersAsTheSearch(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			db, c, clock := indexedUsers(t, shared)
			require.NoError(t, c.DisableTimeIndex())
			const n = 300
			for i := range n {
				clock.Advance(time.Second)
				if i%50 == 49 {
					_, err := c.Delete(db, "doc")
					require.NoError(t, err)
					continue
				}
				_, err := c.Put(db, "doc", user{Age: i})
				require.NoError(t, err)
			}
			_, err := c.Prune(db, "doc", n-20)
			require.NoError(t, err)
			type answer struct {
				v   int64
				err string
			}
			read := func() []answer {
				var out []answer
				for s := -5; s < n+5; s++ {
					d, err := c.AsOfTime("doc", t0.Add(time.Duration(s)*time.Second+time.Millisecond))
					a := answer{v: d.Version}
					if err != nil {
						a.err = err.Error()
					}
					out = append(out, a)
				}
				return out
			}
			want := read()
			require.NoError(t, c.EnableTimeIndex(context.Background()))
			st, err := c.TimeIndex()
			require.NoError(t, err)
			require.Equal(t, versioned.TimeIndexOn, st)
			requireHealthy(t, db)
			require.Equal(t, n-20, indexEntries(t, db))
			require.Equal(t, want, read())

			var sc seekCounter
			restore := versioned.WrapIters(sc.wrap)
			_, err = c.AsOfTime("doc", t0.Add(110*time.Second+time.Millisecond))
			restore()
			require.NoError(t, err)
			require.EqualValues(t, 2, sc.seeks.Load(), "AsOfTime with the index: the index and the versions")
			require.EqualValues(t, 1, sc.nexts.Load(), "AsOfTime with the index: from the version after to the version")

			require.NoError(t, c.DisableTimeIndex())
			require.Zero(t, indexEntries(t, db))
			st, err = c.TimeIndex()
			require.NoError(t, err)
			require.Equal(t, versioned.TimeIndexOff, st)
			require.Equal(t, want, read())
			requireHealthy(t, db)
		})
	}
}

// The index is durable: a DB opened again keeps it on and keeps it
// exact; a second handle of the collection in the DB keeps it too.
func TestTimeIndexDurable(t *testing.T) {
	clock := testutil.NewClock(t0)
	dir := t.TempDir()
	db, err := tipkv.Open(dir, &tipkv.Options{Clock: clock.Now})
	require.NoError(t, err)
	c, err := versioned.NewCollection[user](db, "users", nil)
	require.NoError(t, err)
	require.NoError(t, c.EnableTimeIndex(context.Background()))
	_, err = c.Put(db, "a", user{})
	require.NoError(t, err)
	require.NoError(t, db.Close())

	db, err = tipkv.Open(dir, &tipkv.Options{Clock: clock.Now})
	require.NoError(t, err)
	defer db.Close()
	c, err = versioned.NewCollection[user](db, "users", nil)
	require.NoError(t, err)
	st, err := c.TimeIndex()
	require.NoError(t, err)
	require.Equal(t, versioned.TimeIndexOn, st)
	clock.Advance(time.Second)
	_, err = c.Put(db, "a", user{})
	require.NoError(t, err)
	require.Equal(t, 2, indexEntries(t, db))
	requireHealthy(t, db)
}

// Enabling the index on a collection with data fills it for every
// version, while other goroutines write, prune and purge the collection:
// afterwards it is exact. And a cancelled EnableTimeIndex leaves it
// building, with writes keeping it; a second call finishes it.
func TestTimeIndexEnableRacesWrites(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			db, c, _ := indexedUsers(t, shared)
			require.NoError(t, c.DisableTimeIndex())
			for i := range 300 {
				_, err := c.Put(db, fmt.Sprintf("doc-%03d", i%60), user{Age: i})
				require.NoError(t, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			require.ErrorIs(t, c.EnableTimeIndex(ctx), context.Canceled)
			st, err := c.TimeIndex()
			require.NoError(t, err)
			require.Equal(t, versioned.TimeIndexBuilding, st)
			_, err = c.Put(db, "doc-new", user{})
			require.NoError(t, err)

			var wg sync.WaitGroup
			stop := make(chan struct{})
			for g := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						id := fmt.Sprintf("doc-%03d", (i*7+g*13)%70)
						var err error
						switch i % 5 {
						case 3:
							_, err = c.Prune(db, id, 2)
						case 4:
							_, err = c.Purge(db, id)
						default:
							_, err = c.Put(db, id, user{Age: i})
						}
						if err != nil && !errors.Is(err, tipkv.ErrConflict) {
							t.Error(err)
							return
						}
					}
				}()
			}
			err = c.EnableTimeIndex(context.Background())
			close(stop)
			wg.Wait()
			require.NoError(t, err)
			requireHealthy(t, db)
		})
	}
}

// On a shared engine an Update that runs again (another process wrote
// the document first) writes its index entries once, in the batch that
// commits, and a DisableTimeIndex in another process makes a writer that
// still thinks the index on run again without it.
func TestTimeIndexSharedRerun(t *testing.T) {
	clock := testutil.NewClock(t0)
	dbs := testutil.OpenShared(t, 2, sharedstore.Options{}, &tipkv.Options{Clock: clock.Now})
	a, err := versioned.NewCollection[user](dbs[0], "users", nil)
	require.NoError(t, err)
	b, err := versioned.NewCollection[user](dbs[1], "users", nil)
	require.NoError(t, err)
	require.NoError(t, a.EnableTimeIndex(context.Background()))
	_, err = b.Put(dbs[1], "x", user{}) // b learns the document's latest
	require.NoError(t, err)
	runs := 0
	require.NoError(t, dbs[1].Update(func(w *tipkv.Batch) error {
		runs++
		if runs == 1 {
			clock.Advance(time.Second)
			if _, err := a.Put(dbs[0], "x", user{Name: "first"}); err != nil {
				return err
			}
		}
		clock.Advance(time.Second)
		_, err := b.Put(w, "x", user{Name: "second"})
		return err
	}))
	require.Equal(t, 2, runs)
	require.Equal(t, 3, indexEntries(t, dbs[0]))
	requireHealthy(t, dbs[0])

	require.NoError(t, a.DisableTimeIndex())
	clock.Advance(time.Second)
	_, err = b.Put(dbs[1], "x", user{}) // b's reading says on: its condition fails, it reads again
	require.NoError(t, err)
	require.Zero(t, indexEntries(t, dbs[0]))
	requireHealthy(t, dbs[0])
}

// A change of the index's state waits for the Updates that hold a
// document of the collection, since they decided how to keep the index
// under the state before: a document created by an Update that was
// running while EnableTimeIndex filled the index gets its entry.
func TestTimeIndexEnableWaitsForUpdates(t *testing.T) {
	db, c, _ := indexedUsers(t, false)
	require.NoError(t, c.DisableTimeIndex())
	wrote, release := make(chan struct{}), make(chan struct{})
	updated := make(chan error, 1)
	go func() {
		updated <- db.Update(func(b *tipkv.Batch) error {
			if _, err := c.Put(b, "new", user{}); err != nil {
				return err
			}
			close(wrote)
			<-release
			return nil
		})
	}()
	<-wrote
	waiting := make(chan struct{}, 1)
	defer versioned.OnWait(func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})()
	enabled := make(chan error, 1)
	go func() { enabled <- c.EnableTimeIndex(context.Background()) }()
	var enableErr error
	select {
	case <-waiting: // it waits for the Update: let the Update commit
		close(release)
		enableErr = <-enabled
	case enableErr = <-enabled: // it did not wait
		close(release)
	}
	require.NoError(t, <-updated)
	require.NoError(t, enableErr)
	requireHealthy(t, db)
}
