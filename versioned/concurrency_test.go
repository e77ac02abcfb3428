package versioned_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

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

// Updates that write the same documents in opposite orders do not
// deadlock, and neither do Puts on the DB beside them.
func TestUpdatesInOppositeOrdersDoNotDeadlock(t *testing.T) {
	db, users := openUsers(t)
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
				err := db.Update(func(b *tipkv.Batch) error {
					if _, err := users.Put(b, first, user{}); err != nil {
						return err
					}
					_, err := users.Put(b, second, user{})
					return err
				})
				if err != nil {
					t.Error(err)
					return
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
		d, err := users.Latest(id)
		require.NoError(t, err)
		require.Equal(t, int64(1200), d.Version)
	}
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
