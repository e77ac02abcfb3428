package tipkvtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// Members of a consumer group (versioned.Member): one active member per
// group, takeover once the lease and the engine's ClockSkew have passed,
// and every write of a member that lost the group refused in its own
// batch. Clocks are injected: no test waits for a lease to run out.
func memberCases() []testCase {
	return []testCase{
		{"OneActive", checked(testMembersOneActive)},
		{"TakeoverAfterExpiry", checked(testMembersTakeoverAfterExpiry)},
		{"LateAdvanceRefused", checked(testMembersLateAdvanceRefused)},
		{"LateAdvanceAloneRefused", checked(testMembersLateAdvanceAloneRefused)},
		{"Model", checked(testMembersModel)},
		{"StandbyProjectsExactlyOnce", checked(testMembersStandbyProjectsExactlyOnce)},
	}
}

const memberLease = 10 * time.Second

// memberDBs returns the DBs members run on: on a shared engine a second
// handle, as another process would open it, for every other member.
func memberDBs(t *testing.T, b backend, db *tipkv.DB) []*tipkv.DB {
	if b.Second == nil {
		return []*tipkv.DB{db}
	}
	return []*tipkv.DB{db, b.Second(t, db, nil)}
}

func joinAll(t *testing.T, dbs []*tipkv.DB, clock *testutil.Clock, names ...string) ([]*versioned.Feed[click], []*versioned.Member[click]) {
	t.Helper()
	var fs []*versioned.Feed[click]
	var ms []*versioned.Member[click]
	for i, name := range names {
		db := dbs[i%len(dbs)]
		f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now})
		require.NoError(t, err)
		m, err := f.Join("s", "g", name, &versioned.MemberOptions{Lease: memberLease, Clock: clock.Now})
		require.NoError(t, err)
		fs, ms = append(fs, f), append(ms, m)
	}
	return fs, ms
}

func appendClicks(t *testing.T, db *tipkv.DB, f *versioned.Feed[click], clock *testutil.Clock, n int) []int64 {
	t.Helper()
	var ps []int64
	for i := range n {
		clock.Set(sec(i))
		p, err := f.Append(db, "s", click{fmt.Sprint(i)})
		require.NoError(t, err)
		ps = append(ps, p)
	}
	return ps
}

// Two members of one group: the first to Acquire holds it, the other
// stands by and cannot move the cursor; after the holder leaves, the
// other takes the group in the next epoch and resumes at its cursor.
func testMembersOneActive(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	ps := appendClicks(t, db, f, clock, 5)
	dbs := memberDBs(t, b, db)
	dbB := dbs[len(dbs)-1]
	_, ms := joinAll(t, dbs, clock, "a", "b")
	a, bm := ms[0], ms[1]

	_, err := f.Holder("s", "g")
	require.ErrorIs(t, err, tipkv.ErrNotFound, "no member took the group yet")
	require.ErrorIs(t, a.Advance(db, ps[0]), tipkv.ErrLeaseLost, "a member that holds nothing")
	ok, err := a.Acquire()
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 1, a.Epoch())
	ok, err = bm.Acquire()
	require.NoError(t, err)
	require.False(t, ok, "a holds the group")
	require.Zero(t, bm.Epoch())
	h, err := f.Holder("s", "g")
	require.NoError(t, err)
	require.Equal(t, versioned.Lease{Member: "a", Epoch: 1, Deadline: clock.Now().Add(memberLease)}, h)

	require.NoError(t, a.Advance(db, ps[1]))
	require.ErrorIs(t, bm.Advance(dbB, ps[2]), tipkv.ErrLeaseLost)
	require.ErrorIs(t, bm.Renew(), tipkv.ErrLeaseLost)
	ok, err = a.Acquire() // renews
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 1, a.Epoch(), "a renewal keeps the epoch")
	require.NoError(t, db.Update(func(tx *tipkv.Batch) error {
		if err := a.Advance(tx, ps[2]); err != nil {
			return err
		}
		return a.Advance(tx, ps[3]) // twice in one Update
	}))
	require.ErrorIs(t, a.Advance(db, ps[1]), tipkv.ErrConflict, "behind the cursor")
	c, err := f.Cursor("s", "g")
	require.NoError(t, err)
	require.Equal(t, ps[3], c)

	require.NoError(t, a.Leave())
	require.Zero(t, a.Epoch())
	ok, err = bm.Acquire()
	require.NoError(t, err)
	require.True(t, ok, "a left: b takes over without waiting")
	require.EqualValues(t, 2, bm.Epoch())
	require.Equal(t, ps[3], bm.Position(), "b resumes at a's cursor")
	require.ErrorIs(t, a.Advance(db, ps[4]), tipkv.ErrLeaseLost)
	require.NoError(t, bm.Advance(dbB, ps[4]))
	c, err = f.Cursor("s", "g")
	require.NoError(t, err)
	require.Equal(t, ps[4], c)
	require.Equal(t, []string{"g"}, groupNames(t, f))
}

func groupNames(t *testing.T, f *versioned.Feed[click]) []string {
	var out []string
	for _, g := range testutil.Collect(t, f.Groups("s")) {
		out = append(out, g.Name)
	}
	return out
}

// A member that stops renewing keeps the group until its lease and the
// engine's ClockSkew have passed, by an injected clock, and not a
// nanosecond less; then another member takes it over in the next epoch,
// and the old member's Advance and Renew are refused, writing nothing.
func testMembersTakeoverAfterExpiry(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	ps := appendClicks(t, db, f, clock, 5)
	skew := Caps(t, db).ClockSkew
	dbs := memberDBs(t, b, db)
	dbB := dbs[len(dbs)-1]
	_, ms := joinAll(t, dbs, clock, "a", "b")
	a, bm := ms[0], ms[1]
	start := clock.Now()
	ok, err := a.Acquire()
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, a.Advance(db, ps[1]))

	// a crashes: it renews no more.
	clock.Set(start.Add(memberLease + skew - 1))
	ok, err = bm.Acquire()
	require.NoError(t, err)
	require.False(t, ok, "1 ns before the lease and the skew allowance end")
	clock.Set(start.Add(memberLease + skew))
	ok, err = bm.Acquire()
	require.NoError(t, err)
	require.True(t, ok, "the lease and the skew allowance ended")
	require.EqualValues(t, 2, bm.Epoch())
	require.Equal(t, ps[1], bm.Position())

	// a wakes up: it still believes it holds epoch 1.
	require.EqualValues(t, 1, a.Epoch())
	err = db.Update(func(tx *tipkv.Batch) error {
		if _, err := f.Append(tx, "proj", click{"late"}); err != nil {
			return err
		}
		return a.Advance(tx, ps[2])
	})
	require.ErrorIs(t, err, tipkv.ErrLeaseLost)
	require.Zero(t, a.Epoch(), "a knows it lost the group")
	require.Empty(t, testutil.Collect(t, f.Since("proj", 0, tipkv.Query{})), "the late member's Update wrote nothing")
	require.ErrorIs(t, a.Renew(), tipkv.ErrLeaseLost)
	ok, err = a.Acquire()
	require.NoError(t, err)
	require.False(t, ok, "b holds the group now")
	c, err := f.Cursor("s", "g")
	require.NoError(t, err)
	require.Equal(t, ps[1], c)
	require.NoError(t, bm.Advance(dbB, ps[2]))

	// A member that rejoins under the holder's name (a restarted
	// instance) takes the group at once, fencing its old incarnation.
	fs, again := joinAll(t, memberDBs(t, b, db), clock, "b")
	ok, err = again[0].Acquire()
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 3, again[0].Epoch())
	require.ErrorIs(t, bm.Advance(dbB, ps[3]), tipkv.ErrLeaseLost)
	require.NoError(t, again[0].Advance(db, ps[3]))
	h, err := fs[0].Holder("s", "g")
	require.NoError(t, err)
	require.Equal(t, "b", h.Member)
	require.EqualValues(t, 3, h.Epoch)
}

// The fence is a condition of the Advance's own batch, not a read before
// it: a member whose Advance joined an Update while it held the group, and
// whose Update commits after another member took the group over, moves
// nothing, on every engine.
func testMembersLateAdvanceRefused(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	ps := appendClicks(t, db, f, clock, 5)
	skew := Caps(t, db).ClockSkew
	dbs := memberDBs(t, b, db)
	_, ms := joinAll(t, dbs, clock, "a", "b")
	a, bm := ms[0], ms[1]
	start := clock.Now()
	ok, err := a.Acquire()
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, a.Advance(db, ps[0]))

	runs := 0
	err = db.Update(func(tx *tipkv.Batch) error {
		runs++
		if _, err := f.Append(tx, "proj", click{"late"}); err != nil {
			return err
		}
		if err := a.Advance(tx, ps[3]); err != nil {
			return err
		}
		if runs == 1 {
			// While a's Update is open, a's lease runs out and b takes over.
			clock.Set(start.Add(memberLease + skew))
			ok, err := bm.Acquire()
			if err != nil || !ok {
				return fmt.Errorf("b did not take over: %v %v", ok, err)
			}
		}
		return nil
	})
	require.ErrorIs(t, err, tipkv.ErrLeaseLost, "refused at commit, then found lost")
	require.EqualValues(t, 2, bm.Epoch())
	c, err := f.Cursor("s", "g")
	require.NoError(t, err)
	require.Equal(t, ps[0], c, "the late member moved nothing")
	require.Empty(t, testutil.Collect(t, f.Since("proj", 0, tipkv.Query{})))
	require.NoError(t, bm.Advance(dbs[len(dbs)-1], ps[1]))
}

// As LateAdvanceRefused, with the late member's Update holding nothing
// but its Advance, and the member that took over advancing the cursor
// before the late one commits: only the group's fence can refuse it. The
// members are in two handles (two processes): in one DB, the late
// Update holds the cursor, and no other write of it can happen before it
// commits.
func testMembersLateAdvanceAloneRefused(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle: the late member's Update holds the cursor until it commits")
	}
	db, f, clock := openFeed(t, b)
	ps := appendClicks(t, db, f, clock, 5)
	skew := Caps(t, db).ClockSkew
	dbs := memberDBs(t, b, db)
	_, ms := joinAll(t, dbs, clock, "a", "b")
	a, bm := ms[0], ms[1]
	dbB := dbs[len(dbs)-1]
	start := clock.Now()
	ok, err := a.Acquire()
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, a.Advance(db, ps[0]))

	runs := 0
	err = db.Update(func(tx *tipkv.Batch) error {
		runs++
		if err := a.Advance(tx, ps[3]); err != nil {
			return err
		}
		if runs == 1 {
			clock.Set(start.Add(memberLease + skew))
			ok, err := bm.Acquire()
			if err != nil || !ok {
				return fmt.Errorf("b did not take over: %v %v", ok, err)
			}
			if err := bm.Advance(dbB, ps[1]); err != nil {
				return err
			}
		}
		return nil
	})
	require.ErrorIs(t, err, tipkv.ErrLeaseLost, "refused at commit, then found lost")
	c, err := f.Cursor("s", "g")
	require.NoError(t, err)
	require.Equal(t, ps[1], c, "the late member moved nothing")
	require.NoError(t, bm.Advance(dbB, ps[2]))
}

// A model test: random joins, acquires, renews, advances, leaves, crashes
// (a member forgotten without leaving, its name joining again later) and
// clock steps across members in one or two handles, each result checked
// against a model of the group: who holds it in which epoch until when,
// and where its cursor is. The seed is printed.
func testMembersModel(t *testing.T, b backend) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	db, f, clock := openFeed(t, b)
	ps := appendClicks(t, db, f, clock, 50)
	skew := Caps(t, db).ClockSkew
	dbs := memberDBs(t, b, db)
	names := []string{"m0", "m1", "m2"}
	type live struct {
		m     *versioned.Member[click]
		db    *tipkv.DB
		epoch int64 // the epoch this incarnation holds, per the model
	}
	members := map[string]*live{}
	join := func(name string) {
		db := dbs[rng.IntN(len(dbs))]
		_, ms := joinAll(t, []*tipkv.DB{db}, clock, name)
		members[name] = &live{m: ms[0], db: db}
	}
	for _, n := range names {
		join(n)
	}
	var holder string // the model
	var epoch, deadline, cursor int64
	now := func() int64 { return clock.Now().UnixNano() }
	steps := b.N(300)
	for step := range steps {
		name := names[rng.IntN(len(names))]
		lm := members[name]
		where := fmt.Sprintf("seed %d step %d %s", seed, step, name)
		switch op := rng.IntN(7); op {
		case 0: // acquire
			ok, err := lm.m.Acquire()
			require.NoError(t, err, where)
			switch {
			case holder == name && lm.epoch == epoch && epoch != 0:
				require.True(t, ok, "%s: renew by acquire", where)
				deadline = now() + int64(memberLease)
			case holder == "" || holder == name || now() >= deadline+int64(skew):
				require.True(t, ok, "%s: take over from %q", where, holder)
				for _, o := range members {
					o.epoch = 0
				}
				holder, epoch, deadline = name, epoch+1, now()+int64(memberLease)
				lm.epoch = epoch
				require.Equal(t, cursor, lm.m.Position(), where)
			default:
				require.False(t, ok, "%s: %q holds it", where, holder)
			}
			require.Equal(t, lm.epoch, lm.m.Epoch(), where)
		case 1: // renew
			err := lm.m.Renew()
			if lm.epoch != 0 && lm.epoch == epoch {
				require.NoError(t, err, where)
				deadline = now() + int64(memberLease)
			} else {
				require.ErrorIs(t, err, tipkv.ErrLeaseLost, where)
			}
		case 2, 3: // advance
			to := cursor + int64(rng.IntN(3))*int64(time.Second)
			to = min(to, ps[len(ps)-1])
			if cursor == 0 {
				to = ps[rng.IntN(3)]
			}
			err := lm.m.Advance(lm.db, to)
			switch {
			case lm.epoch == 0 || lm.epoch != epoch:
				require.ErrorIs(t, err, tipkv.ErrLeaseLost, where)
			case to <= cursor:
				require.ErrorIs(t, err, tipkv.ErrConflict, "%s: to %d at the cursor %d", where, to, cursor)
				require.NotErrorIs(t, err, tipkv.ErrLeaseLost, where)
			default:
				require.NoError(t, err, where)
				cursor = to
			}
		case 4: // leave
			require.NoError(t, lm.m.Leave(), where)
			if lm.epoch != 0 && lm.epoch == epoch {
				deadline = 0 - int64(skew) // ended now
			}
			lm.epoch = 0
		case 5: // crash: the incarnation is forgotten, the name joins again
			join(name)
		case 6: // time passes
			clock.Set(clock.Now().Add(time.Duration(rng.IntN(8)) * time.Second))
		}
		c, err := f.Cursor("s", "g")
		require.NoError(t, err, where)
		require.Equal(t, cursor, c, where)
		if holder != "" {
			h, err := f.Holder("s", "g")
			require.NoError(t, err, where)
			require.Equal(t, holder, h.Member, where)
			require.Equal(t, epoch, h.Epoch, where)
		}
	}
}

// Two members follow one stream while it is written, each ready to
// project it (appending each event's position to a projection and
// advancing in one Update). The active one stops halfway: on a shared
// engine its handle closes as a killed process's would, without leaving,
// and the standby takes over once the injected clock passes the lease;
// on an exclusive engine it leaves. The projection holds every event
// once, in order.
func testMembersStandbyProjectsExactlyOnce(t *testing.T, b backend) {
	clock := testutil.NewClock(t0)
	db := b.Open(t, nil)
	var dbA *tipkv.DB
	if b.Second != nil {
		dbA = b.Second(t, db, nil)
	} else {
		dbA = db
	}
	f, err := versioned.NewFeed[tick](db, nil)
	require.NoError(t, err)
	n := max(b.N(400), 20)
	for i := range n {
		_, err := f.Append(db, "s", tick{I: i})
		require.NoError(t, err)
	}
	opts := &versioned.MemberOptions{Lease: memberLease, RenewEvery: 5 * time.Millisecond, Clock: clock.Now}
	member := func(db *tipkv.DB, name string) (*versioned.Feed[tick], *versioned.Member[tick]) {
		f, err := versioned.NewFeed[tick](db, nil)
		require.NoError(t, err)
		m, err := f.Join("s", "g", name, opts)
		require.NoError(t, err)
		return f, m
	}
	fa, a := member(dbA, "a")
	fb, bm := member(db, "b")
	ok, err := a.Acquire()
	require.NoError(t, err)
	require.True(t, ok)

	// run follows as member m and projects until stop returns true or the
	// projection holds n events; it returns how many it projected.
	run := func(ctx context.Context, db *tipkv.DB, f *versioned.Feed[tick], m *versioned.Member[tick], stop func(int) bool) (int, error) {
		done := 0
		for e, err := range m.Follow(ctx) {
			if err != nil {
				return done, err
			}
			err := db.Update(func(tx *tipkv.Batch) error {
				if _, err := f.Append(tx, "proj", tick{I: int(e.Position >> 32), J: int(e.Position & 0xffffffff)}); err != nil {
					return err
				}
				return m.Advance(tx, e.Position)
			})
			if errors.Is(err, tipkv.ErrLeaseLost) {
				continue
			}
			if err != nil {
				return done, err
			}
			done++
			if stop(done) {
				return done, nil
			}
		}
		return done, errors.New("follow ended")
	}
	var wg sync.WaitGroup
	bctx, bcancel := context.WithCancel(context.Background())
	defer bcancel()
	bDone := make(chan int, 1)
	bErr := make(chan error, 1)
	spawn(&wg, func() {
		k, err := run(bctx, db, fb, bm, func(int) bool {
			c, err := fb.Cursor("s", "g")
			return err != nil || c == lastPosition(t, fb)
		})
		bDone <- k
		bErr <- err
	})
	aCtx, aCancel := context.WithCancel(context.Background())
	half := n / 2
	ka, err := run(aCtx, dbA, fa, a, func(k int) bool {
		if k == half && dbA != db {
			// Killed: its Follow's Leave finds the handle closed.
			require.NoError(t, dbA.Close())
		}
		return k == half
	})
	require.NoError(t, err)
	require.Equal(t, half, ka)
	if dbA != db {
		h, err := f.Holder("s", "g")
		require.NoError(t, err)
		require.Equal(t, "a", h.Member, "a did not leave")
		clock.Set(t0.Add(memberLease + Caps(t, db).ClockSkew))
	}
	aCancel()
	kb := <-bDone
	require.NoError(t, <-bErr)
	wg.Wait()
	require.Equal(t, n, ka+kb)
	want := positionsOf(testutil.Collect(t, f.Since("s", 0, tipkv.Query{Limit: n + 1})))
	checkProjectionOf(t, f, "proj", want)
}

func lastPosition(t testing.TB, f *versioned.Feed[tick]) int64 {
	for e, err := range f.Newest("s", tipkv.Query{Limit: 1}) {
		require.NoError(t, err)
		return e.Position
	}
	return 0
}

func checkProjectionOf(t testing.TB, f *versioned.Feed[tick], stream string, want []int64) {
	t.Helper()
	var got []int64
	for e, err := range f.Since(stream, 0, tipkv.Query{Limit: len(want) + 1}) {
		require.NoError(t, err)
		got = append(got, int64(e.Value.I)<<32|int64(e.Value.J))
	}
	require.Equal(t, want, got)
}
