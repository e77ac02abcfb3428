package versioned_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

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
	require.Equal(t, testutil.Range(2, 1), versionsOf(testutil.Collect(t, users.History("held", tipkv.Query{}))))
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
		hist := testutil.Collect(t, users.History(fmt.Sprint("d", i), tipkv.Query{}))
		require.Equal(t, testutil.Range(2*rounds, 1), versionsOf(hist))
	}
}
