package tipkvtest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
)

// documentConcurrencyCases returns the tests of concurrent writers on one
// DB, on every engine: versions stay dense and unique, PutIf lets exactly
// one writer win, and Updates never deadlock.
func documentConcurrencyCases() []testCase {
	return []testCase{
		{"ConcurrentPutsAreDense", checked(testConcurrentPutsAreDense)},
		{"ConcurrentPutsWithAbortsStayDense", checked(testConcurrentPutsWithAbortsStayDense)},
		{"ConcurrentPutIf", checked(testConcurrentPutIf)},
		{"UpdatesInOppositeOrdersDoNotDeadlock", checked(testUpdatesInOppositeOrdersDoNotDeadlock)},
		{"ConcurrentPutsAndDeletesAreDense", checked(testConcurrentPutsAndDeletesAreDense)},
	}
}

// N goroutines x puts of one document: exactly versions 1..N*puts.
func testConcurrentPutsAreDense(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	goroutines, puts := 8, b.N(300)
	got := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		spawn(&wg, func() {
			for i := range puts {
				v, err := users.Put(db, "hot", person{Name: fmt.Sprint(g), Age: i})
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], v)
			}
		})
	}
	wg.Wait()
	var all []int64
	for _, vs := range got {
		require.True(t, slices.IsSorted(vs), "one goroutine's versions increase")
		all = append(all, vs...)
	}
	slices.Sort(all)
	require.Equal(t, testutil.Range(1, int64(goroutines*puts)), all)
	require.Equal(t, testutil.Range(int64(goroutines*puts), 1), versionsOf(requireDense(t, users, "hot")))
}

// Updates that fail give their versions back: the committed versions stay
// dense while Updates of other goroutines fail around them.
func testConcurrentPutsWithAbortsStayDense(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	boom := errors.New("boom")
	var committed atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		spawn(&wg, func() {
			for i := range b.N(200) {
				err := db.Update(func(bt *tipkv.Batch) error {
					if _, err := users.Put(bt, "a", person{Age: i}); err != nil {
						return err
					}
					if _, err := users.Put(bt, fmt.Sprint("side", g), person{}); err != nil {
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
		})
	}
	wg.Wait()
	require.Equal(t, testutil.Range(committed.Load(), 1), versionsOf(testutil.Collect(t, users.History("a", tipkv.Query{}))))
}

// Optimistic writers: each reads the latest, writes on it with PutIf, and
// retries on conflict. Every success is a distinct version, and no update
// is lost.
func testConcurrentPutIf(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	var conflicts atomic.Int64
	goroutines, each := 6, b.N(60)
	var wg sync.WaitGroup
	for range goroutines {
		spawn(&wg, func() {
			for range each {
				for {
					var latest int64
					d, err := users.Latest("counter")
					if err == nil {
						latest = d.Version
					} else if !errors.Is(err, tipkv.ErrNotFound) {
						t.Error(err)
						return
					}
					v, err := users.PutIf(db, "counter", person{Age: d.Value.Age + 1}, latest)
					if err == nil {
						if v != latest+1 {
							t.Errorf("PutIf(%d) wrote %d", latest, v)
						}
						break
					}
					if !errors.Is(err, tipkv.ErrConflict) {
						t.Error(err)
						return
					}
					conflicts.Add(1)
				}
			}
		})
	}
	wg.Wait()
	d, err := users.Latest("counter")
	require.NoError(t, err)
	require.Equal(t, int64(goroutines*each), d.Version)
	require.Equal(t, goroutines*each, d.Value.Age, "no lost update")
	t.Logf("%d conflicts", conflicts.Load())
}

// Updates that write the same documents in opposite orders never hang:
// where two would wait for each other, the one that would close the cycle
// fails with ErrConflict and gives its versions back, and a retry goes
// through. Puts on the DB beside them never fail.
func testUpdatesInOppositeOrdersDoNotDeadlock(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	var conflicts atomic.Int64
	rounds := b.N(100)
	var wg sync.WaitGroup
	for g := range 4 {
		spawn(&wg, func() {
			first, second := "x", "y"
			if g%2 == 1 {
				first, second = second, first
			}
			for range rounds {
				for {
					err := db.Update(func(bt *tipkv.Batch) error {
						if _, err := users.Put(bt, first, person{}); err != nil {
							return err
						}
						_, err := users.Put(bt, second, person{})
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
				if _, err := users.Put(db, second, person{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, id := range []string{"x", "y"} {
		require.Equal(t, testutil.Range(int64(6*rounds), 1), versionsOf(requireDense(t, users, id)), "dense")
	}
	t.Logf("%d deadlocks broken", conflicts.Load())
}

// Puts and Deletes of one document from many goroutines: versions stay
// dense, markers included, and no Delete follows a marker.
func testConcurrentPutsAndDeletesAreDense(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	each := b.N(150)
	var wg sync.WaitGroup
	for g := range 4 {
		spawn(&wg, func() {
			for i := range each {
				var err error
				if (g+i)%4 == 0 {
					_, err = users.Delete(db, "doc")
				} else {
					_, err = users.Put(db, "doc", person{})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	hist := requireDense(t, users, "doc")
	markers := requireNoMarkerAfterMarker(t, hist)
	require.Equal(t, 3*each, len(hist)-markers, "every Put wrote a version")
	require.Positive(t, markers)
}
