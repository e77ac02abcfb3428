package tipkvtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// documentTimeCases returns the tests of commit times: every version
// carries the time of the Update that wrote it, every read returns it, and
// times increase with versions within a document whatever the clocks of
// the processes that write it.
func documentTimeCases() []testCase {
	return []testCase{
		{"CommitTimes", checked(testCommitTimes)},
		{"CommitTimeOncePerUpdate", checked(testCommitTimeOncePerUpdate)},
		{"CommitTimesSkewedClocks", checked(testCommitTimesSkewedClocks)},
		{"CommitTimesAfterPurgeElsewhere", checked(testCommitTimesAfterPurgeElsewhere)},
		{"TimeModel", checked(func(t *testing.T, b backend) { testTimeModel(t, b, false) })},
		{"TimeModelIndexed", checked(func(t *testing.T, b backend) { testTimeModel(t, b, true) })},
		{"PurgeHorizon", checked(testPurgeHorizon)},
		{"RewindPastAYoungDocument", checked(testRewindPastAYoungDocument)},
	}
}

// requireTimesIncrease requires that hist, a History newest first, has a
// commit time on every version and that times decrease strictly with
// versions.
func requireTimesIncrease[T any](t testing.TB, hist []versioned.Doc[T]) {
	t.Helper()
	for i, d := range hist {
		require.False(t, d.Untimed(), "version %d of %q has no commit time", d.Version, d.ID)
		if i > 0 {
			require.True(t, d.Time.Before(hist[i-1].Time), "version %d of %q at %v is not before version %d at %v",
				d.Version, d.ID, d.Time, hist[i-1].Version, hist[i-1].Time)
		}
	}
}

// Every version, delete markers included, carries its commit time from
// the DB's clock, and every read returns it; when the clock steps back,
// the next version's time is 1 ns past the latest one's.
func testCommitTimes(t *testing.T, b backend) {
	clock := testutil.NewClock(t0)
	db := b.Open(t, clockOpts(clock))
	users := people(t, db)
	put := func(id string, want int64) {
		t.Helper()
		v, err := users.Put(db, id, person{Name: id})
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
	put("a", 1)
	clock.Set(t0.Add(-time.Hour)) // backwards
	put("a", 2)
	clock.Set(t0.Add(-2 * time.Hour))
	v, err := users.Delete(db, "a")
	require.NoError(t, err)
	require.Equal(t, int64(3), v)
	clock.Set(t0.Add(time.Hour))
	put("a", 4)
	put("b", 1) // another document: its own clock reading, no order with "a"
	clock.Set(t0)
	put("c", 1)

	want := map[int64]time.Time{1: t0, 2: t0.Add(1), 3: t0.Add(2), 4: t0.Add(time.Hour)}
	hist := testutil.Collect(t, users.History("a", tipkv.Query{}))
	require.Equal(t, []int64{4, 3, 2, 1}, versionsOf(hist))
	require.True(t, hist[1].Deleted)
	for _, d := range hist {
		require.True(t, want[d.Version].Equal(d.Time), "version %d: %v, want %v", d.Version, d.Time, want[d.Version])
	}
	requireTimesIncrease(t, hist)

	same := func(what string, d versioned.Doc[person], err error) {
		t.Helper()
		require.NoError(t, err, what)
		require.True(t, want[d.Version].Equal(d.Time), "%s: version %d at %v, want %v", what, d.Version, d.Time, want[d.Version])
	}
	d, err := users.Latest("a")
	same("Latest", d, err)
	d, err = users.Get("a", 2)
	same("Get", d, err)
	d, err = users.AsOf("a", 2)
	same("AsOf", d, err)
	page, _, err := users.HistoryPage("a", tipkv.Query{Limit: 2})
	require.NoError(t, err)
	require.True(t, page[1].Deleted)
	require.True(t, want[3].Equal(page[1].Time), "a delete marker's time")
	many, err := users.LatestMany("a", "c")
	require.NoError(t, err)
	same("LatestMany", many[0], nil)
	require.True(t, t0.Equal(many[1].Time), "LatestMany of c")
	for d, err := range users.LatestAll(tipkv.Query{Prefix: "a"}) {
		same("LatestAll", d, err)
	}
	require.NoError(t, db.View(func(s *tipkv.Snapshot) error {
		d, err := users.In(s).Latest("a")
		same("a snapshot's Latest", d, err)
		return nil
	}))

	if b.Reopen != nil {
		db = b.Reopen(t, db, clockOpts(clock))
		users = people(t, db)
		clock.Set(t0) // before version 4's time: the reopened DB reads it
		put("a", 5)
		d, err := users.Latest("a")
		require.NoError(t, err)
		require.True(t, t0.Add(time.Hour+1).Equal(d.Time), "after a reopen: %v", d.Time)
	}
}

// An Update reads the clock once: every version it writes carries that
// reading, and a second version of one document in it 1 ns more; the
// messages it enqueues were enqueued at that reading too.
func testCommitTimeOncePerUpdate(t *testing.T, b backend) {
	clock := testutil.NewClock(t0)
	db := b.Open(t, clockOpts(clock))
	users := people(t, db)
	q := qOpen[string](t, db, "outbox", nil)
	require.NoError(t, db.Update(func(tx *tipkv.Batch) error {
		if _, err := users.Put(tx, "x", person{Name: "x1"}); err != nil {
			return err
		}
		clock.Set(t0.Add(time.Minute)) // not read again by this Update
		if _, err := users.Put(tx, "y", person{Name: "y1"}); err != nil {
			return err
		}
		if _, err := q.Enqueue(tx, "x changed"); err != nil {
			return err
		}
		_, err := users.Put(tx, "x", person{Name: "x2"})
		return err
	}))
	msgs := qPeekAll(t, q)
	require.Len(t, msgs, 1)
	require.True(t, t0.Equal(msgs[0].Enqueued), "the message enqueued at %v", msgs[0].Enqueued)
	hx := testutil.Collect(t, users.History("x", tipkv.Query{}))
	hy := testutil.Collect(t, users.History("y", tipkv.Query{}))
	require.Len(t, hx, 2)
	require.True(t, t0.Equal(hx[1].Time), "x1 at %v", hx[1].Time)
	require.True(t, t0.Add(1).Equal(hx[0].Time), "x2 at %v", hx[0].Time)
	require.True(t, t0.Equal(hy[0].Time), "y1 at %v", hy[0].Time)

	v, err := users.Put(db, "y", person{Name: "y2"})
	require.NoError(t, err)
	d, err := users.Get("y", v)
	require.NoError(t, err)
	require.True(t, t0.Add(time.Minute).Equal(d.Time), "the next write reads the clock again: %v", d.Time)
}

// Two processes of a shared engine whose clocks disagree by an hour
// write one document in turns: times still increase with versions.
func testCommitTimesSkewedClocks(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	ahead := testutil.NewClock(t0.Add(time.Hour))
	behind := testutil.NewClock(t0)
	dbA := b.Open(t, clockOpts(ahead))
	dbB := b.Second(t, dbA, clockOpts(behind))
	a, bb := people(t, dbA), people(t, dbB)
	for i := range 6 {
		c, db := a, dbA
		if i%2 == 1 {
			c, db = bb, dbB
		}
		var err error
		switch i {
		case 3:
			_, err = c.Delete(db, "x")
		case 4:
			_, err = c.PutIf(db, "x", person{Age: i}, 0)
		default:
			_, err = c.Put(db, "x", person{Age: i})
		}
		require.NoError(t, err, "write %d", i)
	}
	for _, c := range []*versioned.Collection[person]{a, bb} {
		hist := testutil.Collect(t, c.History("x", tipkv.Query{}))
		require.Len(t, hist, 6)
		requireTimesIncrease(t, hist)
		require.True(t, t0.Add(time.Hour).Equal(hist[5].Time))
		require.True(t, t0.Add(time.Hour+1).Equal(hist[4].Time), "B's clock is behind A's version 1: 1 ns past it")
	}
}

// A purge restarts version numbers, so what one process remembers of a
// document (its latest version and that version's time) may name a
// version number another process wrote again since, at another time: the
// next write must follow the time stored, not the one remembered. Small
// documents (whose value the handle keeps) and large ones (read again).
func testCommitTimesAfterPurgeElsewhere(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	for _, size := range []int{1, 4 << 10} {
		early := testutil.NewClock(t0)
		late := testutil.NewClock(t0.Add(2 * time.Hour))
		dbA := b.Open(t, clockOpts(early))
		dbB := b.Second(t, dbA, clockOpts(late))
		a, bb := people(t, dbA), people(t, dbB)
		name := strings.Repeat("n", size)
		for range 2 { // A remembers version 2 at t0+1ns (and its value, when small)
			_, err := a.Put(dbA, "x", person{Name: name})
			require.NoError(t, err)
		}
		_, err := bb.Purge(dbB, "x")
		require.NoError(t, err)
		putN(t, bb, dbB, "x", 2) // versions 1 and 2 again, at t0+2h and t0+2h+1ns
		v, err := a.Put(dbA, "x", person{Name: name})
		require.NoError(t, err)
		require.Equal(t, int64(3), v)
		hist := testutil.Collect(t, a.History("x", tipkv.Query{}))
		requireTimesIncrease(t, hist)
		require.True(t, t0.Add(2*time.Hour+2).Equal(hist[0].Time), "size %d: version 3 at %v", size, hist[0].Time)

		for range 2 {
			_, err := a.Put(dbA, "y", person{Name: name})
			require.NoError(t, err)
		}
		_, err = bb.Purge(dbB, "y")
		require.NoError(t, err)
		putN(t, bb, dbB, "y", 2)
		_, err = a.Delete(dbA, "y")
		require.NoError(t, err)
		requireTimesIncrease(t, testutil.Collect(t, a.History("y", tipkv.Query{})))
	}
}

// A document dropped whole (Purge, PurgeExpired) leaves no version to
// answer from, so reads by time before the collection's purge horizon,
// the time from which the last such document was gone, are ErrPruned with
// the horizon as Oldest, on this handle, a second one and in a view; at
// or after it they are exact. A drop of a document already gone earlier
// never lowers it; a Prune does not move it.
func testPurgeHorizon(t *testing.T, b backend) {
	clock := testutil.NewClock(t0)
	db := b.Open(t, clockOpts(clock))
	users := people(t, db)
	ttl, err := versioned.NewCollection[person](db, "users", &versioned.Options[person]{TTL: time.Minute, PurgeInterval: -1})
	require.NoError(t, err)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	requireHorizon := func(c *versioned.Collection[person], id string, asked, want time.Time) {
		t.Helper()
		_, err := c.AsOfTime(id, asked)
		var pe *tipkv.PrunedError
		require.ErrorAs(t, err, &pe, "AsOfTime(%q, %v)", id, asked)
		require.True(t, want.Equal(pe.Oldest), "AsOfTime(%q, %v): oldest %v, want %v", id, asked, pe.Oldest, want)
	}
	requireNotFound := func(c *versioned.Collection[person], id string, asked time.Time) {
		t.Helper()
		_, err := c.AsOfTime(id, asked)
		require.ErrorIs(t, err, tipkv.ErrNotFound, "AsOfTime(%q, %v)", id, asked)
		require.NotErrorIs(t, err, tipkv.ErrPruned, "AsOfTime(%q, %v)", id, asked)
	}

	// Before any purge a time before a document's first version is not found.
	putN(t, users, db, "a", 2) // versions at t0, t0+1ns
	_, err = users.Put(db, "keep", person{Name: "k"})
	require.NoError(t, err)
	requireNotFound(users, "a", at(-time.Second))
	requireNotFound(users, "never", at(time.Second))

	clock.Set(at(10 * time.Second))
	n, err := users.Purge(db, "a")
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	purged := at(10 * time.Second)
	requireHorizon(users, "a", at(time.Second), purged)     // "a" stood then
	requireHorizon(users, "never", at(time.Second), purged) // one horizon per collection
	requireNotFound(users, "a", purged)                     // gone from then on
	requireNotFound(users, "never", at(time.Hour))
	d, err := users.AsOfTime("keep", at(time.Second)) // a version answers
	require.NoError(t, err)
	require.Equal(t, "k", d.Value.Name)
	for _, err := range users.HistoryBetween("a", at(0), at(time.Hour), tipkv.Query{}) {
		require.ErrorIs(t, err, tipkv.ErrPruned, "HistoryBetween from before the horizon")
	}
	require.Empty(t, testutil.Collect(t, users.HistoryBetween("a", purged, at(time.Hour), tipkv.Query{})))
	err = testutil.ReadErr(t, users.LatestAllAsOf(at(time.Second), tipkv.Query{}))
	require.ErrorIs(t, err, tipkv.ErrPruned, "LatestAllAsOf before the horizon")
	got := testutil.Collect(t, users.LatestAllAsOf(purged, tipkv.Query{}))
	require.Len(t, got, 1)
	require.Equal(t, "keep", got[0].ID)
	err = testutil.ReadErr(t, users.ChangedBetween(at(time.Second), at(time.Hour), tipkv.Query{}))
	require.ErrorIs(t, err, tipkv.ErrPruned, "ChangedBetween from before the horizon")
	require.NoError(t, db.View(func(s *tipkv.Snapshot) error {
		_, err := users.In(s).AsOfTime("a", at(time.Second))
		require.ErrorIs(t, err, tipkv.ErrPruned, "in a view")
		return nil
	}))
	if b.Second != nil {
		db2 := b.Second(t, db, clockOpts(clock))
		requireHorizon(people(t, db2), "a", at(time.Second), purged)
	}

	// Written again: its new versions answer; before them, the horizon.
	clock.Set(at(20 * time.Second))
	_, err = users.Put(db, "a", person{Name: "again"})
	require.NoError(t, err)
	d, err = users.AsOfTime("a", at(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, "again", d.Value.Name)
	requireHorizon(users, "a", at(time.Second), purged)
	requireNotFound(users, "a", at(15*time.Second))

	// Prune keeps the horizon where it is; so does the purge of a missing
	// document.
	putN(t, users, db, "b", 3)
	_, err = users.Prune(db, "b", 1)
	require.NoError(t, err)
	_, err = users.Purge(db, "missing")
	require.NoError(t, err)
	requireHorizon(users, "never", at(time.Second), purged)
	requireNotFound(users, "never", at(15*time.Second))

	// A clock that went back cannot lower the horizon, nor put it before
	// the purged document's last version: it is the time its next version
	// would have had.
	clock.Set(at(time.Minute))
	_, err = users.Put(db, "c", person{Name: "c"})
	require.NoError(t, err)
	clock.Set(at(5 * time.Second))
	_, err = users.Purge(db, "c")
	require.NoError(t, err)
	requireHorizon(users, "never", at(30*time.Second), at(time.Minute+1))
	clock.Set(at(40 * time.Second))
	_, err = users.Put(db, "e", person{Name: "e"})
	require.NoError(t, err)
	_, err = users.Purge(db, "e")
	require.NoError(t, err)
	requireHorizon(users, "never", at(30*time.Second), at(time.Minute+1))

	// PurgeExpired raises it too.
	clock.Set(at(2 * time.Minute))
	_, err = ttl.Put(db, "t", person{Name: "short"})
	require.NoError(t, err)
	clock.Set(at(4 * time.Minute))
	st, err := ttl.PurgeExpired(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Purged)
	requireHorizon(users, "t", at(2*time.Minute), at(4*time.Minute))
	requireNotFound(users, "t", at(4*time.Minute))
}

// LatestAllAsOf at a time before every version of a document (it did not
// exist yet) still yields the documents after it: the read that steps
// through the young document's versions ends on the next document's key,
// and must not skip it. Documents of 1 to 6 versions, so that the steps
// run off the document and do not.
func testRewindPastAYoungDocument(t *testing.T, b backend) {
	clock := testutil.NewClock(t0)
	db := b.Open(t, clockOpts(clock))
	users := people(t, db)
	for n := 1; n <= 6; n++ {
		young, old := fmt.Sprintf("%da", n), fmt.Sprintf("%db", n) // the old one right after
		clock.Set(t0)
		_, err := users.Put(db, old, person{Name: old})
		require.NoError(t, err)
		clock.Set(t0.Add(time.Hour))
		putN(t, users, db, young, n)
	}
	var got []string
	for d, err := range users.LatestAllAsOf(t0.Add(time.Minute), tipkv.Query{}) {
		require.NoError(t, err)
		got = append(got, d.ID)
	}
	require.Equal(t, []string{"1b", "2b", "3b", "4b", "5b", "6b"}, got)
}

// timedVersion is one version in the time model.
type timedVersion struct {
	v       int64
	at      time.Time
	deleted bool
	expires time.Time // zero: none
	value   string
}

// A model test of the reads by time: random Put, PutIf, Delete, Prune,
// Purge and writes with a time to live over a few documents, under a
// clock that steps backwards too; then, for thousands of random times,
// AsOfTime and HistoryBetween answer what an in-memory model of every
// version's time says: the version, ErrNotFound, or ErrPruned with the
// oldest time still answerable; and LatestAllAsOf and ChangedBetween
// answer what the model says of the whole collection.
//
// indexed runs it with the collection's time index, enabled after a third
// of the writes (so filled from what is stored, then kept by the writes):
// the answers are the same, and the store's check at the end requires
// the index exact.
func testTimeModel(t *testing.T, b backend, indexed bool) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("TIPKV_TEST_SEED"), 10, 64); err == nil {
		seed = s // replay a failure
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 26))
	clock := testutil.NewClock(t0)
	db := b.Open(t, clockOpts(clock))
	users := people(t, db)
	short, err := versioned.NewCollection[person](db, "users", &versioned.Options[person]{TTL: time.Minute, PurgeInterval: -1})
	require.NoError(t, err)
	ids := []string{"a", "b", "c", "d"}
	model := map[string][]timedVersion{} // kept versions, oldest first
	last := func(id string) (timedVersion, bool) {
		vs := model[id]
		if len(vs) == 0 {
			return timedVersion{}, false
		}
		return vs[len(vs)-1], true
	}
	next := func(id string, base time.Time) (int64, time.Time) {
		l, ok := last(id)
		if !ok {
			return 1, base
		}
		if !l.at.Before(base) {
			base = l.at.Add(1)
		}
		return l.v + 1, base
	}
	steps := b.N(600)
	var lo, hi time.Time = t0, t0
	var horizon time.Time // the collection's purge horizon
	for i := range steps {
		if indexed && i == steps/3 {
			require.NoError(t, users.EnableTimeIndex(context.Background()))
		}
		clock.Set(clock.Now().Add(time.Duration(rng.IntN(40)-10) * time.Second)) // a quarter of the steps go back
		now := clock.Now()
		lo, hi = minTime(lo, now), maxTime(hi, now)
		id := ids[rng.IntN(len(ids))]
		name := fmt.Sprintf("w%d", i)
		switch r := rng.IntN(20); {
		case r < 9:
			c, exp := users, time.Time{}
			if r < 2 {
				c, exp = short, now.Add(time.Minute)
			}
			v, err := c.Put(db, id, person{Name: name})
			require.NoError(t, err)
			want, at := next(id, now)
			require.Equal(t, want, v)
			model[id] = append(model[id], timedVersion{v: v, at: at, expires: exp, value: name})
		case r < 12:
			l, _ := last(id)
			_, err := users.PutIf(db, id, person{Name: name}, l.v)
			require.NoError(t, err)
			v, at := next(id, now)
			model[id] = append(model[id], timedVersion{v: v, at: at, value: name})
		case r < 15:
			_, err = users.Delete(db, id)
			require.NoError(t, err)
			if l, ok := last(id); ok && !l.deleted {
				v, at := next(id, now)
				model[id] = append(model[id], timedVersion{v: v, at: at, deleted: true})
			}
		case r < 19:
			keep := 1 + rng.IntN(4)
			_, err := users.Prune(db, id, keep)
			require.NoError(t, err)
			if n := len(model[id]); n > keep {
				model[id] = model[id][n-keep:]
			}
		default:
			_, err := users.Purge(db, id)
			require.NoError(t, err)
			if len(model[id]) > 0 {
				// The horizon: when the document was gone, the time its
				// next version would have had.
				_, gone := next(id, now)
				horizon = maxTime(horizon, gone)
			}
			delete(model, id)
		}
	}
	if indexed {
		st, err := users.TimeIndex()
		require.NoError(t, err)
		require.Equal(t, versioned.TimeIndexOn, st)
	}
	clock.Set(hi.Add(30 * time.Second)) // some versions with a time to live have expired
	now := clock.Now()
	live := func(tv timedVersion) bool { return !tv.deleted && (tv.expires.IsZero() || now.Before(tv.expires)) }
	checkCollectionAt(t, rng, users, ids, model, horizon, lo, hi, live)
	for range b.N(3000) {
		id := ids[rng.IntN(len(ids))]
		at := lo.Add(time.Duration(rng.Int64N(int64(hi.Sub(lo)+2*time.Minute))) - time.Minute)
		if rng.IntN(10) == 0 {
			if vs := model[id]; len(vs) > 0 { // exactly at a version's time
				at = vs[rng.IntN(len(vs))].at
			}
		}
		vs := model[id]
		d, err := users.AsOfTime(id, at)
		where := fmt.Sprintf("AsOfTime(%q, %v)", id, at)
		var pe *tipkv.PrunedError
		switch {
		case (len(vs) == 0 || vs[0].at.After(at) && vs[0].v == 1) && at.Before(horizon):
			// No version at at, and a document purged whole may have had one.
			require.ErrorIs(t, err, tipkv.ErrPruned, where)
			require.ErrorAs(t, err, &pe, where)
			require.True(t, horizon.Equal(pe.Oldest), "%s: oldest %v, want the horizon %v", where, pe.Oldest, horizon)
		case len(vs) == 0:
			require.ErrorIs(t, err, tipkv.ErrNotFound, where)
		case vs[0].at.After(at) && vs[0].v > 1:
			require.ErrorIs(t, err, tipkv.ErrPruned, where)
			require.ErrorAs(t, err, &pe, where)
			require.True(t, vs[0].at.Equal(pe.Oldest), "%s: oldest %v, want %v", where, pe.Oldest, vs[0].at)
		case vs[0].at.After(at):
			require.ErrorIs(t, err, tipkv.ErrNotFound, where)
		default:
			k := len(vs) - 1
			for vs[k].at.After(at) {
				k--
			}
			if !live(vs[k]) {
				require.ErrorIs(t, err, tipkv.ErrNotFound, "%s: version %d", where, vs[k].v)
				break
			}
			require.NoError(t, err, where)
			require.Equal(t, vs[k].v, d.Version, where)
			require.Equal(t, vs[k].value, d.Value.Name, where)
			require.True(t, vs[k].at.Equal(d.Time), where)
		}

		// Between at and a later time: every kept, unexpired version in it.
		to := at.Add(time.Duration(rng.Int64N(int64(2 * time.Minute))))
		var got []int64
		var gotErr error
		for d, err := range users.HistoryBetween(id, at, to, tipkv.Query{}) {
			if err != nil {
				gotErr = err
				break
			}
			got = append(got, d.Version)
		}
		where = fmt.Sprintf("HistoryBetween(%q, %v, %v)", id, at, to)
		if len(vs) > 0 && vs[0].at.After(at) && vs[0].v > 1 ||
			(len(vs) == 0 || !vs[0].at.Before(at) && vs[0].v == 1) && at.Before(horizon) {
			require.ErrorIs(t, gotErr, tipkv.ErrPruned, where)
			continue
		}
		require.NoError(t, gotErr, where)
		var want []int64
		for k := len(vs) - 1; k >= 0; k-- {
			tv := vs[k]
			if !tv.at.Before(at) && !tv.at.After(to) && (tv.deleted || live(tv)) {
				want = append(want, tv.v)
			}
		}
		require.Equal(t, want, got, where)
	}
}

// modelAt returns, by the model, the version of vs latest at at (0:
// none) and whether retention dropped it.
func modelAt(vs []timedVersion, at time.Time) (tv timedVersion, prunedAt bool) {
	if len(vs) == 0 || vs[0].at.After(at) {
		return timedVersion{}, len(vs) > 0 && vs[0].v > 1
	}
	k := len(vs) - 1
	for vs[k].at.After(at) {
		k--
	}
	return vs[k], false
}

// checkCollectionAt compares LatestAllAsOf and ChangedBetween with the
// model at a few random times.
func checkCollectionAt(t *testing.T, rng *rand.Rand, users *versioned.Collection[person], ids []string, model map[string][]timedVersion, horizon, lo, hi time.Time, live func(timedVersion) bool) {
	t.Helper()
	random := func() time.Time {
		return lo.Add(time.Duration(rng.Int64N(int64(hi.Sub(lo)+2*time.Minute))) - time.Minute)
	}
	for range 60 {
		at := random()
		var want []string
		wantPruned := at.Before(horizon)
		for _, id := range ids {
			tv, pr := modelAt(model[id], at)
			wantPruned = wantPruned || pr
			if tv.v != 0 && live(tv) {
				want = append(want, fmt.Sprintf("%s@%d", id, tv.v))
			}
		}
		var got []string
		var gotErr error
		for d, err := range users.LatestAllAsOf(at, tipkv.Query{}) {
			if err != nil {
				gotErr = err
				break
			}
			got = append(got, fmt.Sprintf("%s@%d", d.ID, d.Version))
		}
		if wantPruned {
			require.ErrorIs(t, gotErr, tipkv.ErrPruned, "LatestAllAsOf(%v)", at)
		} else {
			require.NoError(t, gotErr, "LatestAllAsOf(%v)", at)
			require.Equal(t, want, got, "LatestAllAsOf(%v)", at)
		}

		to := at.Add(time.Duration(1 + rng.Int64N(int64(3*time.Minute))))
		want, got, gotErr, wantPruned = nil, nil, nil, at.Before(horizon)
		for _, id := range ids {
			b, pr := modelAt(model[id], at)
			a, _ := modelAt(model[id], to)
			wantPruned = wantPruned || pr
			if b.v != a.v {
				want = append(want, fmt.Sprintf("%s %d>%d", id, liveV(b, live), liveV(a, live)))
			}
		}
		for ch, err := range users.ChangedBetween(at, to, tipkv.Query{}) {
			if err != nil {
				gotErr = err
				break
			}
			got = append(got, fmt.Sprintf("%s %d>%d", ch.ID, ch.Before.Version, ch.After.Version))
		}
		if wantPruned {
			require.ErrorIs(t, gotErr, tipkv.ErrPruned, "ChangedBetween(%v, %v)", at, to)
		} else {
			require.NoError(t, gotErr, "ChangedBetween(%v, %v)", at, to)
			require.Equal(t, want, got, "ChangedBetween(%v, %v)", at, to)
		}
	}
}

// liveV is tv's version when it is live, else 0.
func liveV(tv timedVersion, live func(timedVersion) bool) int64 {
	if tv.v == 0 || !live(tv) {
		return 0
	}
	return tv.v
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
