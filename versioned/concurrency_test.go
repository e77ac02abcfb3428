package versioned_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// 8 goroutines x 1,000 Puts of one document: exactly versions 1..8,000.
func TestConcurrentPutsAreDense(t *testing.T) {
	db, users := openUsers(t)
	const goroutines, puts = 8, 1000
	got := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range puts {
				v, err := users.Put(db, "hot", user{Name: fmt.Sprint(g), Age: i})
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], v)
			}
		}()
	}
	wg.Wait()
	var all []int64
	for _, vs := range got {
		require.True(t, slices.IsSorted(vs), "one goroutine's versions increase")
		all = append(all, vs...)
	}
	slices.Sort(all)
	require.Equal(t, seq(1, goroutines*puts), all)

	hist := collect(t, users.History("hot", tipkv.Query{}))
	require.Equal(t, seq(goroutines*puts, 1), versionsOf(hist))
	d, err := users.Latest("hot")
	require.NoError(t, err)
	require.Equal(t, int64(goroutines*puts), d.Version)
}

// Updates that fail give their versions back: the committed versions stay
// dense while Updates of other goroutines fail around them.
func TestConcurrentPutsWithAbortsStayDense(t *testing.T) {
	db, users := openUsers(t)
	boom := errors.New("boom")
	var committed atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				err := db.Update(func(b *tipkv.Batch) error {
					if _, err := users.Put(b, "a", user{Age: i}); err != nil {
						return err
					}
					if _, err := users.Put(b, fmt.Sprint("side", g), user{}); err != nil {
						return err
					}
					if (g+i)%3 == 0 {
						return boom
					}
					return nil
				})
				if err == nil {
					committed.Add(1)
				} else if !errors.Is(err, boom) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, seq(committed.Load(), 1), versionsOf(collect(t, users.History("a", tipkv.Query{}))))
}

// Optimistic writers: each reads the latest, writes on it with PutIf, and
// retries on conflict. Every success is a distinct version.
func TestConcurrentPutIf(t *testing.T) {
	db, users := openUsers(t)
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				for {
					var latest int64
					d, err := users.Latest("counter")
					if err == nil {
						latest = d.Version
					} else if !errors.Is(err, tipkv.ErrNotFound) {
						t.Error(err)
						return
					}
					_, err = users.PutIf(db, "counter", user{Age: d.Value.Age + 1}, latest)
					if err == nil {
						break
					}
					if !errors.Is(err, tipkv.ErrConflict) {
						t.Error(err)
						return
					}
					conflicts.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	d, err := users.Latest("counter")
	require.NoError(t, err)
	require.Equal(t, int64(600), d.Version)
	require.Equal(t, 600, d.Value.Age, "no lost update")
	t.Logf("%d conflicts", conflicts.Load())
}

// Updates that write the same documents in opposite orders never hang:
// where two would wait for each other, the one that would close the cycle
// fails with ErrConflict and gives its versions back, and a retry goes
// through. Puts on the DB beside them never fail.
func TestUpdatesInOppositeOrdersDoNotDeadlock(t *testing.T) {
	db, users := openUsers(t)
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, second := "x", "y"
			if g%2 == 1 {
				first, second = second, first
			}
			for range 200 {
				for {
					err := db.Update(func(b *tipkv.Batch) error {
						if _, err := users.Put(b, first, user{}); err != nil {
							return err
						}
						_, err := users.Put(b, second, user{})
						return err
					})
					if err == nil {
						break
					}
					if !errors.Is(err, tipkv.ErrConflict) {
						t.Error(err)
						return
					}
					conflicts.Add(1)
				}
				if _, err := users.Put(db, second, user{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, id := range []string{"x", "y"} {
		require.Equal(t, seq(1200, 1), versionsOf(collect(t, users.History(id, tipkv.Query{}))), "dense")
	}
	t.Logf("%d deadlocks broken", conflicts.Load())
}

// The cycle, step by step: the Update that would close it fails with
// ErrConflict; the other one, waiting, then goes through.
func TestDeadlockFailsTheUpdateThatWouldCloseIt(t *testing.T) {
	db, users := openUsers(t)
	waiting := make(chan struct{}, 4)
	defer versioned.OnWait(func() { waiting <- struct{}{} })()
	holdsX, holdsY := make(chan struct{}), make(chan struct{})
	first := make(chan error)
	go func() {
		first <- db.Update(func(b *tipkv.Batch) error {
			if _, err := users.Put(b, "x", user{Name: "first"}); err != nil {
				return err
			}
			close(holdsX)
			<-holdsY
			_, err := users.Put(b, "y", user{Name: "first"}) // waits for the second
			return err
		})
	}()
	err := db.Update(func(b *tipkv.Batch) error {
		if _, err := users.Put(b, "y", user{Name: "second"}); err != nil {
			return err
		}
		<-holdsX
		close(holdsY)
		<-waiting // the first now waits for y
		_, err := users.Put(b, "x", user{Name: "second"})
		return err
	})
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, `collection "users", id "x": `)
	require.ErrorContains(t, err, "deadlock")
	require.NoError(t, <-first)
	for _, id := range []string{"x", "y"} {
		d, err := users.Latest(id)
		require.NoError(t, err)
		require.Equal(t, int64(1), d.Version, "the failed Update's versions were given back")
		require.Equal(t, "first", d.Value.Name)
	}
}

// Inside an Update's function, a write on the DB commits on its own when
// it touches documents the Update does not hold, and fails at once, with
// an error that says to pass the Batch, when it touches one it holds:
// waiting would be for ever.
func TestWriteOnTheDBInsideUpdate(t *testing.T) {
	db, users := openUsers(t)
	feed, err := versioned.NewFeed[int](db, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		if _, err := users.Put(b, "held", user{}); err != nil {
			return err
		}
		require.NoError(t, feed.Trim(b, "held", 1))

		v, err := users.Put(db, "free", user{Name: "alone"})
		require.NoError(t, err)
		require.Equal(t, int64(1), v)
		d, err := users.Latest("free")
		require.NoError(t, err, "committed on its own, before the Update")
		require.Equal(t, "alone", d.Value.Name)
		require.NoError(t, db.Update(func(inner *tipkv.Batch) error {
			_, err := users.Put(inner, "free", user{})
			return err
		}), "a nested Update of other documents commits too")

		for name, write := range map[string]func() error{
			"Put":    func() error { _, err := users.Put(db, "held", user{}); return err },
			"PutIf":  func() error { _, err := users.PutIf(db, "held", user{}, 0); return err },
			"Delete": func() error { return users.Delete(db, "held") },
			"Prune":  func() error { _, err := users.Prune(db, "held", 1); return err },
			"Purge":  func() error { _, err := users.Purge(db, "held"); return err },
			"Trim":   func() error { return feed.Trim(db, "held", 0) },
			"nested Update": func() error {
				return db.Update(func(inner *tipkv.Batch) error {
					if _, err := users.Put(inner, "other", user{}); err != nil {
						return err
					}
					_, err := users.Put(inner, "held", user{})
					return err
				})
			},
		} {
			err := write()
			require.ErrorIs(t, err, tipkv.ErrInvalid, name)
			require.ErrorContains(t, err, "pass the *tipkv.Batch", name)
		}
		return nil
	}))
	require.Equal(t, []int64{1}, versionsOf(collect(t, users.History("held", tipkv.Query{}))))
	require.Equal(t, seq(2, 1), versionsOf(collect(t, users.History("free", tipkv.Query{}))))
	require.Empty(t, collect(t, users.History("other", tipkv.Query{})), "the refused nested Update wrote nothing")
}

// A write waiting for a document held by an Update of another goroutine
// wakes with ErrClosed when the DB closes.
func TestWaiterWakesWhenTheDBCloses(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	users := newUsers(t, db)
	waiting := make(chan struct{}, 1)
	defer versioned.OnWait(func() { waiting <- struct{}{} })()
	holding, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error)
	go func() {
		holder <- db.Update(func(b *tipkv.Batch) error {
			if _, err := users.Put(b, "a", user{}); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	waiter := make(chan error)
	go func() {
		_, err := users.Put(db, "a", user{})
		waiter <- err
	}()
	<-waiting
	closed := make(chan error)
	go func() { closed <- db.Close() }()
	require.ErrorIs(t, <-waiter, tipkv.ErrClosed)
	close(release)
	require.ErrorIs(t, <-holder, tipkv.ErrClosed, "the holder's commit fails: the DB is closed")
	require.NoError(t, <-closed)
}

// An entry that an Update holds survives any number of cache generations:
// a Put of that document from another goroutine waits for the Update,
// where a fresh entry would have let it write version 1 again.
func TestHeldEntriesAreNeverEvicted(t *testing.T) {
	defer versioned.SetCacheEntries(2)()
	db, users := openUsers(t)
	waiting := make(chan struct{}, 1)
	defer versioned.OnWait(func() { waiting <- struct{}{} })()
	other := make(chan int64)
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		v, err := users.Put(b, "held", user{})
		require.NoError(t, err)
		require.Equal(t, int64(1), v)
		for i := range 20 {
			_, err := users.Put(db, fmt.Sprint("churn", i), user{})
			require.NoError(t, err)
		}
		go func() {
			v, err := users.Put(db, "held", user{})
			if err != nil {
				t.Error(err)
			}
			other <- v
		}()
		<-waiting
		return nil
	}))
	require.Equal(t, int64(2), <-other)
	require.Equal(t, seq(2, 1), versionsOf(collect(t, users.History("held", tipkv.Query{}))))
}

// With a latest-version cache far smaller than the documents written, Puts
// of evicted documents read their latest version back from the store, and
// versions stay dense.
func TestSmallVersionCache(t *testing.T) {
	defer versioned.SetCacheEntries(8)()
	db, users := openUsers(t)
	const docs, rounds = 50, 6
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for i := range docs {
					if _, err := users.Put(db, fmt.Sprint("d", i), user{Age: g*100 + r}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := range docs {
		hist := collect(t, users.History(fmt.Sprint("d", i), tipkv.Query{}))
		require.Equal(t, seq(2*rounds, 1), versionsOf(hist))
	}
}

// Trims racing with Appends, AppendAt into the past and each other, some
// in Updates that fail: whatever the interleaving, a trim once everything
// is quiet drops every event it should. A trim remembers how low the
// stream's events go so as not to step over old tombstones; an Append in
// flight must keep that bound low enough.
func TestTrimsRacingAppends(t *testing.T) {
	defer versioned.SetRangeDeleteMin(8)()
	db, f, clock := openFeed(t)
	boom := errors.New("boom")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				var err error
				switch (g + i) % 6 {
				case 0:
					clock.Set(clock.Now().Add(time.Millisecond))
					_, err = f.Append(db, "s", click{})
				case 1:
					_, err = f.AppendAt(db, "s", t0.Add(-time.Duration(i*g)*time.Microsecond), click{})
				case 2:
					err = f.Trim(db, "s", 20)
				case 3:
					err = f.TrimBefore(db, "s", t0.Add(-time.Duration(150*g)*time.Microsecond))
				case 4:
					err = db.Update(func(b *tipkv.Batch) error {
						if _, err := f.AppendAt(b, "s", t0.Add(-time.Duration(500+i)*time.Microsecond), click{}); err != nil {
							return err
						}
						if err := f.Trim(b, "s", 10); err != nil {
							return err
						}
						if i%3 == 0 {
							return boom
						}
						return nil
					})
					if errors.Is(err, boom) {
						err = nil
					}
				case 5:
					_, err = f.Append(db, "s", click{})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Once quiet, a trim drops all it should.
	cut := t0.Add(-200 * time.Microsecond)
	require.NoError(t, f.TrimBefore(db, "s", cut))
	for _, e := range collect(t, f.Newest("s", tipkv.Query{})) {
		require.False(t, e.Time().Before(cut), "event at %v survived TrimBefore(%v)", e.Time(), cut)
	}
	require.NoError(t, f.Trim(db, "s", 5))
	require.Len(t, collect(t, f.Newest("s", tipkv.Query{})), 5)
	require.NoError(t, f.Trim(db, "s", 0))
	require.Empty(t, collect(t, f.Newest("s", tipkv.Query{})))
}

// Puts and Deletes of one document from many goroutines: versions stay
// dense, markers included.
func TestConcurrentPutsAndDeletesAreDense(t *testing.T) {
	db, users := openUsers(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				var err error
				if (g+i)%4 == 0 {
					err = users.Delete(db, "doc")
				} else {
					_, err = users.Put(db, "doc", user{})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	hist := collect(t, users.History("doc", tipkv.Query{}))
	require.Equal(t, seq(hist[0].Version, 1), versionsOf(hist))
	markers := 0
	for i, d := range hist {
		if d.Deleted {
			markers++
			if i+1 < len(hist) {
				require.False(t, hist[i+1].Deleted, "a Delete of a deleted document writes nothing")
			}
		}
	}
	require.Equal(t, 600, len(hist)-markers, "every Put wrote a version")
	require.Positive(t, markers)
}
