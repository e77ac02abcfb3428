package tipkvtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// followCases returns the tests of following a feed (Since, Follow) and of
// its named cursors.
func followCases() []testCase {
	return []testCase{
		{"SinceIsOldestFirst", checked(testSinceIsOldestFirst)},
		{"SinceWithoutLimitYieldsEveryEvent", checked(testSinceWithoutLimitYieldsEveryEvent)},
		{"FollowerLosesNothing", checked(testFollowerLosesNothing)},
		{"FollowerLosesNothingNoSync", checked(testFollowerLosesNothingNoSync)},
		{"FollowEnds", checked(testFollowEnds)},
		{"FollowerAcrossProcesses", checked(testFollowerAcrossProcesses)},
		{"GroupCursors", checked(testGroupCursors)},
		{"GroupsProjectExactlyOnce", checked(testGroupsProjectExactlyOnce)},
	}
}

// followEvents is the size of the follower loss test: the issue's
// 1,000,000 events, scaled down under -short and the race detector.
func followEvents(b backend) int {
	if testing.Short() || raceEnabled {
		return b.N(20_000)
	}
	return b.N(1_000_000)
}

type tick struct {
	W int `msgpack:"w"` // writer
	I int `msgpack:"i"` // its Update
	J int `msgpack:"j"` // event in the Update
}

// Since pages a stream oldest first, whatever the gaps between positions
// and the page size; the bounds of the Query hold.
func testSinceIsOldestFirst(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	var want []int64
	// Runs of dense positions with gaps of growing size between them.
	at := sec(0)
	for run := range 12 {
		for i := range run + 1 {
			clock.Set(at)
			p, err := f.Append(db, "s", click{fmt.Sprint(run, i)})
			require.NoError(t, err)
			want = append(want, p)
		}
		at = at.Add(1 << (3 * run))
	}
	for _, limit := range []int{1, 2, 3, 7, 50, 0} {
		var got []int64
		after := int64(0)
		for {
			page := positionsOf(testutil.Collect(t, f.Since("s", after, tipkv.Query{Limit: limit})))
			if len(page) == 0 {
				break
			}
			if limit > 0 {
				require.LessOrEqual(t, len(page), limit)
			}
			got = append(got, page...)
			after = page[len(page)-1]
		}
		require.Equal(t, want, got, "limit %d", limit)
	}
	all := positionsOf(testutil.Collect(t, f.Since("s", 0, tipkv.Query{From: want[5], To: want[20]})))
	require.Equal(t, want[5:21], all)
	require.Empty(t, testutil.Collect(t, f.Since("s", want[len(want)-1], tipkv.Query{})))
	require.Empty(t, testutil.Collect(t, f.Since("nothing", 0, tipkv.Query{})))
	require.ErrorIs(t, testutil.ReadErr(t, f.Since("s", -1, tipkv.Query{})), tipkv.ErrInvalid)
	require.ErrorIs(t, testutil.ReadErr(t, f.Since("s", 0, tipkv.Query{After: "x"})), tipkv.ErrInvalid)
	require.ErrorIs(t, testutil.ReadErr(t, f.Since("", 0, tipkv.Query{})), tipkv.ErrInvalid)
}

// Query.Limit 0 means no limit for Since as for every read: a stream of
// more than SincePage events is yielded whole, oldest first, in one
// range; a limit above SincePage is honoured exactly; a loop that stops
// early reads no further.
func testSinceWithoutLimitYieldsEveryEvent(t *testing.T, b backend) {
	db, f, _ := openFeed(t, b)
	n := 2*versioned.SincePage + 17
	var want []int64
	for len(want) < n {
		require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
			for range min(100, n-len(want)) { // within a shared engine's batch limits
				p, err := f.Append(bt, "s", click{"p"})
				if err != nil {
					return err
				}
				want = append(want, p)
			}
			return nil
		}))
	}
	require.Equal(t, want, positionsOf(testutil.Collect(t, f.Since("s", 0, tipkv.Query{}))))
	require.Equal(t, want[:versioned.SincePage+1], positionsOf(testutil.Collect(t, f.Since("s", 0, tipkv.Query{Limit: versioned.SincePage + 1}))))
	require.Equal(t, want[3:n-5], positionsOf(testutil.Collect(t, f.Since("s", want[2], tipkv.Query{To: want[n-6]}))))
	seen := 0
	for _, err := range f.Since("s", 0, tipkv.Query{}) {
		require.NoError(t, err)
		if seen++; seen == 10 {
			break
		}
	}
	require.Equal(t, 10, seen)
}

func testFollowerLosesNothing(t *testing.T, b backend) {
	followerLosesNothing(t, b, nil)
}

func testFollowerLosesNothingNoSync(t *testing.T, b backend) {
	followerLosesNothing(t, b, &tipkv.Options{NoSync: true})
}

var errAbortUpdate = errors.New("this Update aborts")

// The follower test: 8 goroutines append in Updates that do other
// work too (another stream, a yield to the scheduler), some aborting after
// their Appends; one follower follows the stream. Every committed event is
// delivered exactly once, in position order, no aborted one is; and the
// same holds across a close and reopen in the middle, the follower
// resuming from the last position it handled.
func followerLosesNothing(t *testing.T, b backend, opts *tipkv.Options) {
	total := followEvents(b)
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen")
	}
	db := b.Open(t, opts)
	var (
		mu        sync.Mutex
		committed = map[int64]tick{}
		aborted   = map[tick]bool{}
		delivered = map[int64]tick{}
		last      int64 // the follower's stored position
	)
	// run writes about n events with 8 writers and follows them; it
	// returns when the follower has delivered the sentinel appended after
	// the writers are done.
	run := func(db *tipkv.DB, n, phase int) {
		f, err := versioned.NewFeed[tick](db, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		followed := make(chan error, 1)
		go func() {
			followed <- func() error {
				for e, err := range f.Follow(ctx, "s", last) {
					if err != nil {
						return err
					}
					mu.Lock()
					if e.Position <= last {
						mu.Unlock()
						return fmt.Errorf("position %d delivered after %d", e.Position, last)
					}
					if prev, ok := delivered[e.Position]; ok {
						mu.Unlock()
						return fmt.Errorf("position %d delivered twice: %v and %v", e.Position, prev, e.Value)
					}
					delivered[e.Position], last = e.Value, e.Position
					mu.Unlock()
					if e.Value.W < 0 {
						return nil // the sentinel
					}
				}
				return errors.New("the follower ended early")
			}()
		}()
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		for w := range 8 {
			spawn(&wg, func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(phase)))
				for i := 0; left.Load() > 0; i++ {
					k := 1 + rng.IntN(8)
					abort := rng.IntN(10) == 0
					var ps []int64
					err := db.Update(func(tx *tipkv.Batch) error {
						ps = ps[:0]
						for j := range k {
							p, err := f.Append(tx, "s", tick{W: w + 8*phase, I: i, J: j})
							if err != nil {
								return err
							}
							ps = append(ps, p)
							if j == 0 {
								// Other work, between Appends: another
								// stream, and a chance for other
								// Updates to commit meanwhile.
								if _, err := f.Append(tx, fmt.Sprint("other-", w), tick{W: w}); err != nil {
									return err
								}
								runtime.Gosched()
							}
						}
						if abort {
							return errAbortUpdate
						}
						return nil
					})
					mu.Lock()
					switch {
					case abort && errors.Is(err, errAbortUpdate):
						for j := range k {
							aborted[tick{W: w + 8*phase, I: i, J: j}] = true
						}
					case err != nil:
						mu.Unlock()
						t.Error(err)
						return
					default:
						for j, p := range ps {
							committed[p] = tick{W: w + 8*phase, I: i, J: j}
						}
						left.Add(-int64(k))
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		p, err := f.Append(db, "s", tick{W: -1, I: phase})
		require.NoError(t, err)
		mu.Lock()
		committed[p] = tick{W: -1, I: phase}
		mu.Unlock()
		require.NoError(t, <-followed)
	}
	run(db, total/2, 0)
	db = b.Reopen(t, db, opts)
	run(db, total-total/2, 1)

	mu.Lock()
	defer mu.Unlock()
	for p, e := range delivered {
		require.False(t, aborted[e], "aborted event %v delivered at %d", e, p)
	}
	require.Equal(t, len(committed), len(delivered))
	for p, e := range committed {
		got, ok := delivered[p]
		require.True(t, ok, "committed event %v at %d never delivered", e, p)
		require.Equal(t, e, got)
	}
	t.Logf("%d events delivered, %d aborted ones not", len(delivered), len(aborted))
}

// Follow ends with ctx.Err() when its context ends, and with ErrClosed
// when the DB closes, while it waits.
func testFollowEnds(t *testing.T, b backend) {
	db, f, _ := openFeed(t, b)
	_, err := f.Append(db, "s", click{"a"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	var end error
	for e, err := range f.Follow(ctx, "s", 0) {
		if err != nil {
			end = err
			break
		}
		got = append(got, e.Value.Page)
		cancel() // now waiting for more
	}
	require.Equal(t, []string{"a"}, got)
	require.ErrorIs(t, end, context.Canceled)

	done := make(chan error, 1)
	waiting := make(chan struct{})
	go func() {
		for _, err := range f.Follow(context.Background(), "s", 0) {
			if err != nil {
				done <- err
				return
			}
			close(waiting)
		}
		done <- errors.New("ended without an error")
	}()
	<-waiting
	require.NoError(t, db.Close())
	require.ErrorIs(t, <-done, tipkv.ErrClosed)
}

// Named cursors: Advance moves a group's cursor only from where it is,
// with the Update or not at all; Lag is the time it trails, and
// ErrNotFound for a group without a cursor; Trim keeps
// every event after the slowest cursor unless told otherwise.
func testGroupCursors(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	var ps []int64
	for i := range 10 {
		clock.Set(sec(i))
		p, err := f.Append(db, "s", click{fmt.Sprint(i)})
		require.NoError(t, err)
		ps = append(ps, p)
	}
	c, err := f.Cursor("s", "g")
	require.NoError(t, err)
	require.Zero(t, c)
	_, err = f.Lag("s", "g")
	require.ErrorIs(t, err, tipkv.ErrNotFound, "a group that never advanced has no lag (it was 56 years)")
	require.NoError(t, db.Update(func(tx *tipkv.Batch) error {
		if err := f.Advance(tx, "s", "g", 0, ps[2]); err != nil {
			return err
		}
		return f.Advance(tx, "s", "g", ps[2], ps[3]) // twice in one Update
	}))
	c, err = f.Cursor("s", "g")
	require.NoError(t, err)
	require.Equal(t, ps[3], c)
	require.ErrorIs(t, f.Advance(db, "s", "g", ps[2], ps[5]), tipkv.ErrConflict)
	require.ErrorIs(t, f.Advance(db, "s", "g", ps[3], ps[1]), tipkv.ErrInvalid)
	require.ErrorIs(t, f.Advance(db, "s", "", 0, 1), tipkv.ErrInvalid)
	// An aborted Update leaves the cursor where it was.
	require.ErrorIs(t, db.Update(func(tx *tipkv.Batch) error {
		if err := f.Advance(tx, "s", "g", ps[3], ps[4]); err != nil {
			return err
		}
		return errAbortUpdate
	}), errAbortUpdate)
	c, err = f.Cursor("s", "g")
	require.NoError(t, err)
	require.Equal(t, ps[3], c)
	lag, err := f.Lag("s", "g")
	require.NoError(t, err)
	require.Equal(t, 6*time.Second, lag)

	require.NoError(t, f.Advance(db, "s", "slow", 0, ps[1]))
	require.NoError(t, f.Trim(db, "s", 2))
	require.Equal(t, ps[2:], positionsOf(testutil.Collect(t, f.Since("s", 0, tipkv.Query{}))), "nothing after the slowest cursor is dropped")
	require.NoError(t, f.DropGroup(db, "s", "slow"))
	_, err = f.Lag("s", "slow")
	require.ErrorIs(t, err, tipkv.ErrNotFound, "a dropped group")
	require.NoError(t, f.TrimBefore(db, "s", sec(9)))
	require.Equal(t, ps[4:], positionsOf(testutil.Collect(t, f.Since("s", 0, tipkv.Query{}))), "g's cursor holds")
	past, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{TrimPastCursors: true})
	require.NoError(t, err)
	require.NoError(t, past.Trim(db, "s", 1))
	require.Equal(t, ps[9:], positionsOf(testutil.Collect(t, f.Since("s", 0, tipkv.Query{}))))

	if b.Second != nil {
		// Another process moves the cursor: this one's memory is stale,
		// the commit fails, and the rerun reads and answers ErrConflict.
		db2 := b.Second(t, db, nil)
		f2, err := versioned.NewFeed[click](db2, nil)
		require.NoError(t, err)
		require.NoError(t, f2.Advance(db2, "s", "g", ps[3], ps[6]))
		require.ErrorIs(t, f.Advance(db, "s", "g", ps[3], ps[7]), tipkv.ErrConflict)
		require.NoError(t, f.Advance(db, "s", "g", ps[6], ps[7]))
		c, err = f2.Cursor("s", "g")
		require.NoError(t, err)
		require.Equal(t, ps[7], c)
	}
}

// Two groups project one stream while it is written, each writing its
// projection (a stream of its own) and its cursor in one Update: each
// projection holds every event once, in order.
func testGroupsProjectExactlyOnce(t *testing.T, b backend) {
	db := b.Open(t, nil)
	f, err := versioned.NewFeed[tick](db, nil)
	require.NoError(t, err)
	n := max(b.N(2000)/4, 1) * 4 // 4 writers of n/4 each: the projectors wait for n
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, g := range []string{"a", "b"} {
		spawn(&wg, func() { errs <- project(ctx, db, f, g, n) })
	}
	for w := range 4 {
		spawn(&wg, func() {
			for i := range n / 4 {
				if _, err := f.Append(db, "s", tick{W: w, I: i}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	wg.Wait()
	want := positionsOf(testutil.Collect(t, f.Since("s", 0, tipkv.Query{Limit: n + 1})))
	for _, g := range []string{"a", "b"} {
		checkProjection(t, f, g, want)
	}
}

// project is one consumer of group g: it follows "s" from its cursor and,
// per event, appends the event's position to the stream "proj-"+g and
// advances its cursor in one Update, until it has handled n events.
func project(ctx context.Context, db *tipkv.DB, f *versioned.Feed[tick], g string, n int) error {
	cur, err := f.Cursor("s", g)
	if err != nil {
		return err
	}
	handled := 0
	for e, err := range f.Follow(ctx, "s", cur) {
		if err != nil {
			return err
		}
		if err := db.Update(func(tx *tipkv.Batch) error {
			if _, err := f.Append(tx, "proj-"+g, tick{I: int(e.Position >> 32), J: int(e.Position & 0xffffffff)}); err != nil {
				return err
			}
			return f.Advance(tx, "s", g, cur, e.Position)
		}); err != nil {
			return err
		}
		cur = e.Position
		if handled++; handled == n {
			return nil
		}
	}
	return errors.New("the follower ended early")
}

// checkProjection requires the projection of group g to hold want, the
// positions of the stream, each once, in order.
func checkProjection(t testing.TB, f *versioned.Feed[tick], g string, want []int64) {
	t.Helper()
	var got []int64
	for e, err := range f.Since("proj-"+g, 0, tipkv.Query{Limit: len(want) + 1}) {
		require.NoError(t, err)
		got = append(got, int64(e.Value.I)<<32|int64(e.Value.J))
	}
	require.Equal(t, want, got, "group %s", g)
}

// On a shared engine two processes append to one stream while a follower
// in one of them follows it: commit order is position order across
// processes, so the follower is given every event once, in order, though
// the other process's commits reach it only through the store.
//
// Both processes append as fast as they can. An Append whose commit lost
// the stream's head to the other process reads the head again and runs
// again, and while the other commits back to back it loses again more
// often than not: on PostgreSQL with its defaults (each COMMIT waits for
// its WAL flush), p99 4-7 retries and at most 11 in 250 Appends per
// process, past DB.Update's default 10 in half the runs. That limit is
// not what this test is about, so the appenders get 100.
func testFollowerAcrossProcesses(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	opts := &tipkv.Options{MaxRetries: 100}
	dbA := b.Open(t, opts)
	dbs := []*tipkv.DB{dbA, b.Second(t, dbA, opts)}
	each := b.N(500)
	var mu sync.Mutex
	committed := map[int64]tick{}
	fa, err := versioned.NewFeed[tick](dbA, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	followed := make(chan error, 1)
	var delivered []int64
	got := map[int64]tick{}
	go func() {
		followed <- func() error {
			for e, err := range fa.Follow(ctx, "s", 0) {
				if err != nil {
					return err
				}
				if n := len(delivered); n > 0 && e.Position <= delivered[n-1] {
					return fmt.Errorf("position %d after %d", e.Position, delivered[n-1])
				}
				delivered = append(delivered, e.Position)
				got[e.Position] = e.Value
				if e.Value.W < 0 {
					return nil
				}
			}
			return errors.New("the follower ended early")
		}()
	}()
	var wg sync.WaitGroup
	for h, db := range dbs {
		f, err := versioned.NewFeed[tick](db, nil)
		require.NoError(t, err)
		for g := range 2 {
			spawn(&wg, func() {
				for i := range each {
					v := tick{W: 2*h + g, I: i}
					p, err := f.Append(db, "s", v)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					committed[p] = v
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	p, err := fa.Append(dbA, "s", tick{W: -1})
	require.NoError(t, err)
	committed[p] = tick{W: -1}
	require.NoError(t, <-followed)
	require.Equal(t, committed, got)
}
