package tipkvtest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
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
	clock := &feedClock{now: t0}
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
	require.NoError(t, users.Delete(db, "a"))
	clock.Set(t0.Add(time.Hour))
	put("a", 4)
	put("b", 1) // another document: its own clock reading, no order with "a"
	clock.Set(t0)
	put("c", 1)

	want := map[int64]time.Time{1: t0, 2: t0.Add(1), 3: t0.Add(2), 4: t0.Add(time.Hour)}
	hist := drain(t, users.History("a", tipkv.Query{}))
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
// reading, and a second version of one document in it 1 ns more.
func testCommitTimeOncePerUpdate(t *testing.T, b backend) {
	clock := &feedClock{now: t0}
	db := b.Open(t, clockOpts(clock))
	users := people(t, db)
	require.NoError(t, db.Update(func(tx *tipkv.Batch) error {
		if _, err := users.Put(tx, "x", person{Name: "x1"}); err != nil {
			return err
		}
		clock.Set(t0.Add(time.Minute)) // not read again by this Update
		if _, err := users.Put(tx, "y", person{Name: "y1"}); err != nil {
			return err
		}
		_, err := users.Put(tx, "x", person{Name: "x2"})
		return err
	}))
	hx := drain(t, users.History("x", tipkv.Query{}))
	hy := drain(t, users.History("y", tipkv.Query{}))
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
	ahead := &feedClock{now: t0.Add(time.Hour)}
	behind := &feedClock{now: t0}
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
			err = c.Delete(db, "x")
		case 4:
			_, err = c.PutIf(db, "x", person{Age: i}, 0)
		default:
			_, err = c.Put(db, "x", person{Age: i})
		}
		require.NoError(t, err, "write %d", i)
	}
	for _, c := range []*versioned.Collection[person]{a, bb} {
		hist := drain(t, c.History("x", tipkv.Query{}))
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
		early := &feedClock{now: t0}
		late := &feedClock{now: t0.Add(2 * time.Hour)}
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
		hist := drain(t, a.History("x", tipkv.Query{}))
		requireTimesIncrease(t, hist)
		require.True(t, t0.Add(2*time.Hour+2).Equal(hist[0].Time), "size %d: version 3 at %v", size, hist[0].Time)

		for range 2 {
			_, err := a.Put(dbA, "y", person{Name: name})
			require.NoError(t, err)
		}
		_, err = bb.Purge(dbB, "y")
		require.NoError(t, err)
		putN(t, bb, dbB, "y", 2)
		require.NoError(t, a.Delete(dbA, "y"))
		requireTimesIncrease(t, drain(t, a.History("y", tipkv.Query{})))
	}
}
