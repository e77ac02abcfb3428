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
	"github.com/tipkv/tipkv/internal/fakes"
	"github.com/tipkv/tipkv/internal/faultstore"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// documentSharedCases returns the tests of documents on a shared engine,
// where several processes write one store: writers on two handles, what a
// handle remembers of a document another wrote, and commits that fail the
// ways a shared engine's fail. They skip on an exclusive engine.
func documentSharedCases() []testCase {
	return []testCase{
		{"SharedWriters", checked(testSharedWriters)},
		{"SharedPutIfAfterAnotherHandle", checked(testSharedPutIfAfterAnotherHandle)},
		{"SharedFaults", checked(testSharedFaults)},
		{"HotWritersTakeTurns", checked(testHotWritersTakeTurns)},
	}
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
	// B's clock is an hour behind A's: commit times still increase with
	// versions within each document.
	dbB := b.Second(t, dbA, &tipkv.Options{Clock: func() time.Time { return time.Now().Add(-time.Hour) }})
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
						_, err = users.Delete(db, id)
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
			requireTimesIncrease(t, hist)
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

	v, err = bb.Delete(dbB, "x")
	require.NoError(t, err)
	require.Equal(t, int64(9), v)
	v, err = a.PutIf(dbA, "x", person{}, 0)
	require.NoError(t, err, "no live document: the latest is a marker")
	require.Equal(t, int64(10), v)

	v, err = a.Delete(dbA, "x")
	require.NoError(t, err)
	require.Equal(t, int64(11), v)
	put(bb, dbB, 12)
	v, err = a.Delete(dbA, "x")
	require.NoError(t, err, "A remembered a marker: the Delete is guarded, fails, reads")
	require.Equal(t, int64(13), v, "the version of the marker its rerun wrote")
	hist := testutil.Collect(t, a.History("x", tipkv.Query{Limit: 2}))
	require.Equal(t, []int64{13, 12}, versionsOf(hist))
	require.Equal(t, []bool{true, false}, deletedOf(hist))

	put(bb, dbB, 14)
	n, err := a.Prune(dbA, "x", 2) // A remembered 13
	require.NoError(t, err)
	require.Equal(t, int64(12), n)
	require.Equal(t, []int64{14, 13}, versionsOf(testutil.Collect(t, a.History("x", tipkv.Query{}))))

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
	require.Equal(t, testutil.Range(4, 1), versionsOf(requireDense(t, a, "x")))
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
	below := fakes.Borrow(s)
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
		c0, a0, l0, f0 := fs.Conditions.Load(), fs.Applied.Load(), fs.Lost.Load(), below.FailedConditions()
		mm := m.clone()
		id := ids[rng.IntN(len(ids))]
		runs, wrongPutIf, update := 1, false, false
		var err error
		var p int64
		marked, wantMarked := int64(0), int64(-1) // a Delete's version, and the model's
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
			marked, err = users.Delete(db, id)
			if mm.live(id) {
				mm[id][mm.next(id)] = markerAge
			}
			wantMarked = mm.latest(id)
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
				var err error
				marked, err = users.Delete(bt, other) // the last run's is the one committed
				return err
			})
			mm[id][mm.next(id)] = step
			if mm.live(other) {
				mm[other][mm.next(other)] = markerAge
			}
			wantMarked = mm.latest(other)
		}
		conds, applied, lost := fs.Conditions.Load()-c0, fs.Applied.Load()-a0, fs.Lost.Load()-l0
		stale := below.FailedConditions() - f0
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
			if wantMarked >= 0 {
				require.Equal(t, wantMarked, marked, "%s: the version Delete returned", where)
			}
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
	for _, e := range testutil.Collect(t, feed.Newest("s", tipkv.Query{})) {
		stored[e.Position] = e.Value
	}
	for p, v := range events {
		require.Equal(t, v, stored[p], "position %d", p)
	}
}

// docVersion names one version of a document.
type docVersion struct {
	id string
	v  int64
}
