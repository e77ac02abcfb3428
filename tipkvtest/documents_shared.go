package tipkvtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/faultstore"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/versioned"
)

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
	require.Equal(t, run(1, int64(goroutines*puts)), all)
	require.Equal(t, run(int64(goroutines*puts), 1), versionsOf(requireDense(t, users, "hot")))
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
	require.Equal(t, run(committed.Load(), 1), versionsOf(drain(t, users.History("a", tipkv.Query{}))))
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
		require.Equal(t, run(int64(6*rounds), 1), versionsOf(requireDense(t, users, id)), "dense")
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
					err = users.Delete(db, "doc")
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

// requireNoMarkerAfterMarker checks that no delete marker follows another
// (a Delete of a deleted document writes nothing) and returns how many
// markers hist holds.
func requireNoMarkerAfterMarker[T any](t testing.TB, hist []versioned.Doc[T]) int {
	t.Helper()
	markers := 0
	for i, d := range hist {
		if d.Deleted {
			markers++
			if i+1 < len(hist) {
				require.False(t, hist[i+1].Deleted, "marker %d follows marker %d", d.Version, hist[i+1].Version)
			}
		}
	}
	return markers
}

// docVersion names one version of a document.
type docVersion struct {
	id string
	v  int64
}

// Two handles (two processes) x 4 goroutines doing Put, PutIf, Delete and
// Prune on a few shared documents: versions stay dense, no version is
// acknowledged twice, no acknowledged Put is overwritten, and every
// successful PutIf(e) wrote e+1 (PutIf(0), no live document, may write
// after a delete marker). A write may give up with ErrConflict
// after its retries; nothing else fails.
func testSharedWriters(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	dbA := b.Open(t, nil)
	dbB := b.Second(t, dbA, nil)
	ids := []string{"x", "y", "z"}
	var (
		mu       sync.Mutex
		acks     = map[[2]any]string{}
		gaveUp   atomic.Int64
		putIfs   atomic.Int64
		counters atomic.Int64
		// afterMarker: versions that a PutIf(0) found to be delete markers
		afterMarker []docVersion
	)
	record := func(id string, v int64, tag string) {
		mu.Lock()
		defer mu.Unlock()
		k := [2]any{id, v}
		if prev, ok := acks[k]; ok {
			t.Errorf("version %d of %q acknowledged twice: %s and %s", v, id, prev, tag)
		}
		acks[k] = tag
	}
	each := b.N(80)
	var wg sync.WaitGroup
	for h, db := range []*tipkv.DB{dbA, dbB} {
		users := people(t, db)
		for g := range 4 {
			spawn(&wg, func() {
				rng := rand.New(rand.NewPCG(uint64(h), uint64(g)))
				for i := range each {
					id := ids[rng.IntN(len(ids))]
					tag := fmt.Sprintf("h%d-g%d-%d", h, g, i)
					var err error
					switch r := rng.IntN(10); {
					case r < 5:
						var v int64
						if v, err = users.Put(db, id, person{Name: tag}); err == nil {
							record(id, v, tag)
						}
					case r < 7:
						page, _, perr := users.HistoryPage(id, tipkv.Query{Limit: 1})
						if perr != nil {
							t.Error(perr)
							return
						}
						var e int64
						if len(page) > 0 {
							e = page[0].Version
						}
						var v int64
						if v, err = users.PutIf(db, id, person{Name: tag}, e); err == nil {
							putIfs.Add(1)
							switch {
							case e == 0 && v > 1:
								// No live document: the latest was a
								// delete marker another writer wrote.
								mu.Lock()
								afterMarker = append(afterMarker, docVersion{id: id, v: v - 1})
								mu.Unlock()
							case v != e+1:
								t.Errorf("PutIf(%q, %d) wrote %d", id, e, v)
							}
							record(id, v, tag)
						}
					case r < 9:
						err = users.Delete(db, id)
					default:
						_, err = users.Prune(db, id, 3+rng.IntN(3))
					}
					counters.Add(1)
					if errors.Is(err, tipkv.ErrConflict) {
						gaveUp.Add(1)
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d writes, %d successful PutIfs, %d conflicts (PutIf) or give-ups", counters.Load(), putIfs.Load(), gaveUp.Load())
	require.Positive(t, putIfs.Load())
	for _, db := range []*tipkv.DB{dbA, dbB} {
		users := people(t, db)
		for _, m := range afterMarker {
			d, err := users.Get(m.id, m.v)
			if err == nil {
				t.Errorf("PutIf(%q, 0) wrote %d after version %d, which is no delete marker", m.id, m.v+1, d.Version)
			}
		}
		for _, id := range ids {
			hist := requireDense(t, users, id)
			requireNoMarkerAfterMarker(t, hist)
			for _, d := range hist {
				tag, ok := acks[[2]any{id, d.Version}]
				switch {
				case d.Deleted:
					require.False(t, ok, "version %d of %q is a marker, but a Put of it was acknowledged", d.Version, id)
				case ok:
					require.Equal(t, tag, d.Value.Name, "version %d of %q", d.Version, id)
				default:
					t.Errorf("version %d of %q holds %q, which no Put acknowledged", d.Version, id, d.Value.Name)
				}
			}
		}
	}
}

// What one handle remembers of a document after another handle wrote it
// is a hint: every write on it still lands right, and a failed commit
// drops it.
func testSharedPutIfAfterAnotherHandle(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	dbA := b.Open(t, nil)
	dbB := b.Second(t, dbA, nil)
	a, bb := people(t, dbA), people(t, dbB)
	put := func(c *versioned.Collection[person], db *tipkv.DB, want int64) {
		t.Helper()
		v, err := c.Put(db, "x", person{Age: int(want)})
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
	putN(t, a, dbA, "x", 3)
	put(bb, dbB, 4)
	put(a, dbA, 5) // A remembered 3

	put(bb, dbB, 6)
	v, err := a.PutIf(dbA, "x", person{}, 6) // A remembered 5: PutIf reads
	require.NoError(t, err)
	require.Equal(t, int64(7), v)

	put(bb, dbB, 8)
	_, err = a.PutIf(dbA, "x", person{}, 7) // A remembered 7: PutIf assumes it, the commit fails
	require.ErrorIs(t, err, tipkv.ErrConflict)
	require.ErrorContains(t, err, "latest version is 8, expected 7", "the conflict is the store's, read after the failed commit")

	require.NoError(t, bb.Delete(dbB, "x")) // marker at 9
	v, err = a.PutIf(dbA, "x", person{}, 0)
	require.NoError(t, err, "no live document: the latest is a marker")
	require.Equal(t, int64(10), v)

	require.NoError(t, a.Delete(dbA, "x")) // marker at 11
	put(bb, dbB, 12)
	require.NoError(t, a.Delete(dbA, "x"), "A remembered a marker: the Delete is guarded, fails, reads")
	hist := drain(t, a.History("x", tipkv.Query{Limit: 2}))
	require.Equal(t, []int64{13, 12}, versionsOf(hist))
	require.Equal(t, []bool{true, false}, deletedOf(hist))

	put(bb, dbB, 14)
	n, err := a.Prune(dbA, "x", 2) // A remembered 13
	require.NoError(t, err)
	require.Equal(t, int64(12), n)
	require.Equal(t, []int64{14, 13}, versionsOf(drain(t, a.History("x", tipkv.Query{}))))

	n, err = bb.Prune(dbB, "x", 1) // oldest now 14; A remembers 13
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	put(a, dbA, 15)
	n, err = a.PruneBefore(dbA, "x", 15)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the oldest version is guarded too")

	n, err = bb.Purge(dbB, "x")
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	put(a, dbA, 1) // A remembered 15
	_, err = a.PutIf(dbA, "x", person{}, 0)
	require.ErrorIs(t, err, tipkv.ErrConflict)
	_, err = bb.PutIf(dbB, "fresh", person{}, 0)
	require.NoError(t, err)
	_, err = a.PutIf(dbA, "fresh", person{}, 0)
	require.ErrorIs(t, err, tipkv.ErrConflict, "PutIf(0) of a document another handle created")
	requireDense(t, a, "x")
	requireDense(t, a, "fresh")

	// Inside an Update: a Put on a stale hint, then a PutIf that counts it.
	put(bb, dbB, 2)
	runs := 0
	require.NoError(t, dbA.Update(func(bt *tipkv.Batch) error {
		runs++
		v, err := a.Put(bt, "x", person{}) // A remembered 1
		if err != nil {
			return err
		}
		_, err = a.PutIf(bt, "x", person{}, v)
		return err
	}))
	require.Equal(t, 2, runs, "the stale hint made the first run fail")
	require.Equal(t, run(4, 1), versionsOf(requireDense(t, a, "x")))
}

// sharedStore is a store for a test's own DB on the store of a backend's
// DB: the backend closes the store, not the test's DB. It counts the
// conditions that failed below any fault the test injects above it.
type sharedStore struct {
	engine.Store
	failed atomic.Int64
}

func (s *sharedStore) Close() error { return nil }

func (s *sharedStore) NewBatch() engine.Batch {
	return &countingBatch{Batch: s.Store.NewBatch(), s: s}
}

type countingBatch struct {
	engine.Batch
	s *sharedStore
}

func (b *countingBatch) Apply(sync bool) error {
	err := b.Batch.Apply(sync)
	if errors.Is(err, engine.ErrConditionFailed) {
		b.s.failed.Add(1)
	}
	return err
}

// Commits fail at random the ways a shared engine's fail (a condition
// another process broke, an outcome unknown after the batch was applied or
// before): DB.Update runs its function again after exactly the failed
// conditions and never after an unknown outcome, no hint survives a failed
// commit (with one handle, a stale hint is the only way a real condition
// can fail), and the store stays what a model of the outcomes says.
func testSharedFaults(t *testing.T, b backend) {
	base := b.Open(t, nil)
	if !Caps(t, base).Shared {
		t.Skip("faults of shared engines")
	}
	s, err := link.StoreOf(base)
	require.NoError(t, err)
	below := &sharedStore{Store: s}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	fs := faultstore.New(below, faultstore.Odds{ConditionFailed: 0.2, UnknownApplied: 0.1, UnknownLost: 0.1}, seed)
	db, err := tipkv.OpenEngine(fs, "faults", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	users := people(t, db)
	feed, err := versioned.NewFeed[int](db, nil)
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(seed, 1))
	m := docModel{"x": {}, "y": {}, "z": {}}
	ids := []string{"x", "y", "z"}
	events := map[int64]int{}
	var unknown, reruns int
	for step := range b.N(300) {
		c0, a0, l0, f0 := fs.Conditions.Load(), fs.Applied.Load(), fs.Lost.Load(), below.failed.Load()
		mm := m.clone()
		id := ids[rng.IntN(len(ids))]
		runs, wrongPutIf, update := 1, false, false
		var err error
		var p int64
		switch r := rng.IntN(10); {
		case r < 4:
			_, err = users.Put(db, id, person{Age: step})
			mm[id][mm.next(id)] = step
		case r < 6:
			e := mm.latest(id)
			if !mm.live(id) && rng.IntN(2) == 0 {
				e = 0
			}
			if rng.IntN(4) == 0 {
				e += 1 + int64(rng.IntN(2))
				// After a Delete both 0 and the marker's version are
				// right: 0 plus 2 can land on the marker (Put v1,
				// Delete v2).
				wrongPutIf = e != mm.latest(id)
			}
			_, err = users.PutIf(db, id, person{Age: step}, e)
			if !wrongPutIf {
				mm[id][mm.next(id)] = step
			}
		case r < 7:
			err = users.Delete(db, id)
			if mm.live(id) {
				mm[id][mm.next(id)] = markerAge
			}
		case r < 8:
			p, err = feed.Append(db, "s", step)
		default:
			other := ids[(slices.Index(ids, id)+1)%len(ids)]
			runs, update = 0, true
			err = db.Update(func(bt *tipkv.Batch) error {
				runs++
				if _, err := users.Put(bt, id, person{Age: step}); err != nil {
					return err
				}
				return users.Delete(bt, other)
			})
			mm[id][mm.next(id)] = step
			if mm.live(other) {
				mm[other][mm.next(other)] = markerAge
			}
		}
		conds, applied, lost := fs.Conditions.Load()-c0, fs.Applied.Load()-a0, fs.Lost.Load()-l0
		stale := below.failed.Load() - f0
		where := fmt.Sprintf("step %d (seed %d)", step, seed)
		switch {
		case wrongPutIf:
			// It assumes its version without a read: the commit fails on
			// the store's conditions (once), or is cut off before them.
			if !errors.Is(err, tipkv.ErrUnknownOutcome) || applied != 0 {
				require.ErrorIs(t, err, tipkv.ErrConflict, where)
			}
			require.LessOrEqual(t, stale, int64(1), "%s: a PutIf on the wrong version fails one commit at most", where)
			continue
		case errors.Is(err, tipkv.ErrUnknownOutcome):
			unknown++
			require.Equal(t, int64(1), applied+lost, where)
			if applied == 1 {
				m = mm // an Append returns no position: the feed check ignores it
			}
		case errors.Is(err, tipkv.ErrConflict):
			require.Equal(t, int64(tipkv.DefaultMaxRetries+1), conds, "%s: gave up after the injected failures only: %v", where, err)
		default:
			require.NoError(t, err, where)
			require.Zero(t, applied+lost, where)
			m = mm
			if p != 0 {
				_, dup := events[p]
				require.False(t, dup, "%s: position %d written twice", where, p)
				events[p] = step
			}
		}
		require.Zero(t, stale, "%s: a hint survived a failed commit", where)
		if update {
			reruns += runs - 1
			require.Equal(t, int(conds), runs-1, "%s: the Update ran again after each failed condition, and only then", where)
		}
		for _, id := range ids {
			hist := requireDense(t, users, id)
			require.Equal(t, newestFirst(m[id]), versionsOf(hist), "%s: %q", where, id)
		}
	}
	t.Logf("%d injected condition failures, %d unknown outcomes (%d applied, %d lost), %d reruns of Updates",
		fs.Conditions.Load(), unknown, fs.Applied.Load(), fs.Lost.Load(), reruns)

	// The acknowledged Appends are all there, at their positions.
	fs.SetOdds(faultstore.Odds{})
	stored := map[int64]int{}
	for _, e := range drain(t, feed.Newest("s", tipkv.Query{})) {
		stored[e.Position] = e.Value
	}
	for p, v := range events {
		require.Equal(t, v, stored[p], "position %d", p)
	}
}
