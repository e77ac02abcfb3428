package tipkvtest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// feedCases returns the feeds tests, each ending with its stores checked
// healthy. How trims write their deletes (how many, of which kind) is
// Pebble's business and stays in versioned's own tests; that trims drop
// what they should with either kind is every engine's, and the race runs
// again with range deletes from 8 events on (32 by default).
func feedCases() []testCase {
	return []testCase{
		{"AppendPositionsFollowTheClock", checked(testAppendPositionsFollowTheClock)},
		{"AppendAtTies", checked(testAppendAtTies)},
		{"AbortedAppendsKeepPositionsUnique", checked(testAbortedAppendsKeepPositionsUnique)},
		{"ConcurrentAppendsAreUnique", checked(testConcurrentAppendsAreUnique)},
		{"NewestAndBetween", checked(testNewestAndBetween)},
		{"Trim", checked(testTrim)},
		{"TrimBefore", checked(testTrimBefore)},
		{"TrimFindsEventsAppendedIntoThePast", checked(testTrimFindsEventsAppendedIntoThePast)},
		{"TrimInsideUpdateSeesOwnAppends", checked(testTrimInsideUpdateSeesOwnAppends)},
		{"TimesOutOfRangeAreInvalid", checked(testTimesOutOfRangeAreInvalid)},
		{"AppendAfterAnEventAtTheLastNanosecond", checked(testAppendAfterAnEventAtTheLastNanosecond)},
		{"FeedUsesTheDBClock", checked(testFeedUsesTheDBClock)},
		{"PositionsContinueAfterReopen", checked(testPositionsContinueAfterReopen)},
		{"PositionsStayAboveTrims", checked(testPositionsStayAboveTrims)},
		{"PositionsStayAboveAnotherProcessTrim", checked(testPositionsStayAboveAnotherProcessTrim)},
		{"TrimsRacingAppends", checked(testTrimsRacingAppends)},
		{"TrimsRacingAppendsWithRangeDeletes", checked(withKnob(&knobs.Versioned.DropRangeMin, 8, testTrimsRacingAppends))},
		{"SharedAppends", checked(testSharedAppends)},
		{"SharedAppendAfterAnotherHandle", checked(testSharedAppendAfterAnotherHandle)},
	}
}

type click struct {
	Page string `msgpack:"page"`
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func openFeed(t testing.TB, b backend) (*tipkv.DB, *versioned.Feed[click], *testutil.Clock) {
	t.Helper()
	db := b.Open(t, nil)
	clock := testutil.NewClock(t0)
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now})
	require.NoError(t, err)
	return db, f, clock
}

func positionsOf[T any](events []versioned.Event[T]) []int64 {
	var out []int64
	for _, e := range events {
		out = append(out, e.Position)
	}
	return out
}

func secondsOf(events []versioned.Event[click]) []int64 {
	var out []int64
	for _, e := range events {
		out = append(out, int64(e.Time().Sub(t0)/time.Second))
	}
	return out
}

func sec(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

func feedKey(stream string, p int64) []byte {
	return codec.AppendDesc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeed), stream), p)
}

func testAppendPositionsFollowTheClock(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	p, err := f.Append(db, "clicks", click{"/a"})
	require.NoError(t, err)
	require.Equal(t, t0.UnixNano(), p)

	clock.Set(t0.Add(time.Second))
	p, err = f.Append(db, "clicks", click{"/b"})
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Second).UnixNano(), p, "a clock that moves on gives its time")

	p, err = f.Append(db, "clicks", click{"/c"})
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Second).UnixNano()+1, p, "a tie is bumped one nanosecond past the last")

	clock.Set(t0.Add(-time.Hour))
	p, err = f.Append(db, "clicks", click{"/d"})
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Second).UnixNano()+2, p, "a clock that steps back is bumped past the last")

	clock.Set(t0.Add(time.Minute))
	p, err = f.Append(db, "clicks", click{"/e"})
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Minute).UnixNano(), p)

	events := testutil.Collect(t, f.Newest("clicks", tipkv.Query{}))
	var pages []string
	for _, e := range events {
		pages = append(pages, e.Value.Page)
		require.Equal(t, "clicks", e.Stream)
	}
	require.Equal(t, []string{"/e", "/d", "/c", "/b", "/a"}, pages, "newest first is append order, reversed")
	require.True(t, events[0].Time().Equal(t0.Add(time.Minute)))

	// Another stream has positions of its own.
	clock.Set(t0)
	p, err = f.Append(db, "other", click{})
	require.NoError(t, err)
	require.Equal(t, t0.UnixNano(), p)
}

func testAppendAtTies(t *testing.T, b backend) {
	db, f, _ := openFeed(t, b)
	at := t0.Add(-time.Hour)
	var got []int64
	for range 3 {
		p, err := f.AppendAt(db, "s", at, click{})
		require.NoError(t, err)
		got = append(got, p)
	}
	n := at.UnixNano()
	require.Equal(t, []int64{n, n + 1, n + 2}, got, "ties keep their order, one nanosecond apart")

	p, err := f.AppendAt(db, "s", at.Add(1), click{})
	require.NoError(t, err)
	require.Equal(t, n+3, p, "the next free nanosecond")

	// Ties inside one Update, whose first event is not yet in the store.
	later := at.Add(time.Minute)
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		for i := range 3 {
			p, err := f.AppendAt(bt, "s", later, click{})
			require.NoError(t, err)
			require.Equal(t, later.UnixNano()+int64(i), p)
		}
		return nil
	}))

	// Past events slot in by time; Append after them still goes last.
	p, err = f.AppendAt(db, "s", at.Add(-time.Second), click{})
	require.NoError(t, err)
	require.Equal(t, at.Add(-time.Second).UnixNano(), p)
	p, err = f.Append(db, "s", click{})
	require.NoError(t, err)
	require.Equal(t, t0.UnixNano(), p)
	p, err = f.AppendAt(db, "s", t0, click{})
	require.NoError(t, err)
	require.Equal(t, t0.UnixNano()+1, p, "AppendAt ties with an Append too")

	all := positionsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{})))
	require.Len(t, all, 10)
	require.True(t, slices.IsSortedFunc(all, func(a, b int64) int { return int(b - a) }))

	for _, bad := range []time.Time{{}, time.Unix(0, 0), time.Unix(-5, 0), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		_, err := f.AppendAt(db, "s", bad, click{})
		require.ErrorIs(t, err, tipkv.ErrInvalid, "%v", bad)
	}
}

func testAbortedAppendsKeepPositionsUnique(t *testing.T, b backend) {
	db, f, _ := openFeed(t, b)
	boom := errors.New("boom")
	var lost int64
	err := db.Update(func(bt *tipkv.Batch) error {
		var err error
		lost, err = f.Append(bt, "s", click{"lost"})
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	p, err := f.Append(db, "s", click{"kept"})
	require.NoError(t, err)
	require.Greater(t, p, lost, "a clock tie after an abort still moves on")

	// The aborted position is free again for AppendAt.
	p, err = f.AppendAt(db, "s", time.Unix(0, lost), click{"at"})
	require.NoError(t, err)
	require.Equal(t, lost, p)
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 2)
}

// Appends racing with a stuck clock, AppendAt ties and AppendAt in
// Updates of times that collide get unique positions.
func testConcurrentAppendsAreUnique(t *testing.T, b backend) {
	db, f, _ := openFeed(t, b)
	goroutines, appends := 8, b.N(150)
	var wg sync.WaitGroup
	for g := range goroutines {
		spawn(&wg, func() {
			for i := range appends {
				var err error
				switch {
				case g%2 == 0:
					_, err = f.Append(db, "s", click{})
				case i%2 == 0:
					_, err = f.AppendAt(db, "s", t0.Add(-time.Hour), click{})
				default:
					err = db.Update(func(bt *tipkv.Batch) error {
						_, err := f.AppendAt(bt, "s", t0.Add(-time.Minute+time.Duration(i)), click{})
						return err
					})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), goroutines*appends, "no event overwrote another")
}

func testNewestAndBetween(t *testing.T, b backend) {
	db, f, _ := openFeed(t, b)
	for i := range 10 {
		_, err := f.AppendAt(db, "s", sec(i), click{Page: string(rune('a' + i))})
		require.NoError(t, err)
	}
	ns := func(i int) int64 { return sec(i).UnixNano() }

	require.Equal(t, []int64{ns(9), ns(8), ns(7)}, positionsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{Limit: 3}))))
	require.Equal(t, []int64{ns(4), ns(3), ns(2)},
		positionsOf(testutil.Collect(t, f.Between("s", sec(2), sec(5), tipkv.Query{}))), "[from, to)")
	require.Equal(t, []int64{ns(4), ns(3)},
		positionsOf(testutil.Collect(t, f.Between("s", sec(2), sec(5), tipkv.Query{From: ns(3)}))), "and q's bounds")
	require.Empty(t, testutil.Collect(t, f.Between("s", t0, t0, tipkv.Query{})))
	require.Empty(t, testutil.Collect(t, f.Between("s", time.Time{}, t0, tipkv.Query{})))
	require.Len(t, testutil.Collect(t, f.Between("s", time.Time{}, t0.Add(time.Hour), tipkv.Query{})), 10)
	require.Empty(t, testutil.Collect(t, f.Newest("nothing", tipkv.Query{})))
	require.ErrorIs(t, testutil.ReadErr(t, f.Between("s", sec(1), t0, tipkv.Query{})), tipkv.ErrInvalid)

	// Pages of Between.
	q := tipkv.Query{Limit: 2}
	var got []int64
	for range 10 {
		page := testutil.Collect(t, f.Between("s", sec(1), sec(8), q))
		if len(page) == 0 {
			break
		}
		got = append(got, positionsOf(page)...)
		q.After = page[len(page)-1].Cursor()
	}
	require.Equal(t, []int64{ns(7), ns(6), ns(5), ns(4), ns(3), ns(2), ns(1)}, got)

	// Bad queries and cursors.
	other, err := f.Append(db, "other", click{})
	require.NoError(t, err)
	otherCursor := versioned.Event[click]{Stream: "other", Position: other}.Cursor()
	docs, err := versioned.NewCollection[click](db, "s", nil)
	require.NoError(t, err)
	_, err = docs.Put(db, "s", click{})
	require.NoError(t, err)
	doc, err := docs.Latest("s")
	require.NoError(t, err)
	for name, q := range map[string]tipkv.Query{
		"negative limit":   {Limit: -1},
		"from after to":    {From: 9, To: 1},
		"prefix":           {Prefix: "x"},
		"garbage":          {After: "not a cursor"},
		"other stream's":   {After: otherCursor},
		"a History cursor": {After: doc.Cursor()},
	} {
		require.ErrorIs(t, testutil.ReadErr(t, f.Newest("s", q)), tipkv.ErrInvalid, name)
	}
	require.Empty(t, versioned.Event[click]{}.Cursor())
}

func testTrim(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	appendN := func(n int) {
		for range n {
			clock.Set(clock.Now().Add(time.Second))
			_, err := f.Append(db, "s", click{})
			require.NoError(t, err)
		}
	}
	appendN(10)
	all := positionsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{})))

	require.NoError(t, f.Trim(db, "s", 4))
	require.Equal(t, all[:4], positionsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{}))))
	require.NoError(t, f.Trim(db, "s", 4))
	require.Equal(t, all[:4], positionsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{}))), "nothing more to trim")

	appendN(3)
	all = positionsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{})))
	require.NoError(t, f.Trim(db, "s", 4))
	require.Equal(t, all[:4], positionsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{}))))

	require.NoError(t, f.Trim(db, "s", 0))
	require.Empty(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})))
	require.ErrorIs(t, f.Trim(db, "s", -1), tipkv.ErrInvalid)
	require.NoError(t, f.Trim(db, "nothing", 3))

	// Positions go on after a trim to nothing.
	p, err := f.Append(db, "s", click{})
	require.NoError(t, err)
	require.Greater(t, p, all[0])

	// A long run.
	appendN(100)
	require.NoError(t, f.Trim(db, "s", 7))
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 7)
}

func testTrimBefore(t *testing.T, b backend) {
	db, f, _ := openFeed(t, b)
	for i := range 10 {
		_, err := f.AppendAt(db, "s", sec(i), click{})
		require.NoError(t, err)
	}
	require.NoError(t, f.TrimBefore(db, "s", sec(3)))
	got := positionsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{})))
	require.Len(t, got, 7)
	require.Equal(t, sec(3).UnixNano(), got[6], "the event at t stays")

	require.NoError(t, f.TrimBefore(db, "s", sec(3)))
	require.NoError(t, f.TrimBefore(db, "s", t0))
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 7, "nothing more to trim")

	require.NoError(t, f.TrimBefore(db, "s", sec(3).Add(1)))
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 6)
	require.NoError(t, f.TrimBefore(db, "s", t0.Add(time.Hour)))
	require.Empty(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})))
}

// An event appended below where earlier trims cut is still trimmed by the
// next trim that covers it.
func testTrimFindsEventsAppendedIntoThePast(t *testing.T, b backend) {
	db, f, _ := openFeed(t, b)
	for i := range 60 {
		_, err := f.AppendAt(db, "s", sec(i), click{})
		require.NoError(t, err)
	}
	require.NoError(t, f.TrimBefore(db, "s", sec(3)))
	require.NoError(t, f.Trim(db, "s", 50))
	require.Equal(t, testutil.Range(59, 10), secondsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{}))))

	_, err := f.AppendAt(db, "s", sec(1).Add(time.Millisecond), click{})
	require.NoError(t, err)
	_, err = f.AppendAt(db, "s", sec(5), click{})
	require.NoError(t, err)
	require.NoError(t, f.TrimBefore(db, "s", sec(55)))
	require.Equal(t, testutil.Range(59, 55), secondsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{}))))
}

// A trim inside an Update counts and drops the Update's own Appends.
func testTrimInsideUpdateSeesOwnAppends(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	for i := range 3 {
		_, err := f.AppendAt(db, "s", sec(i), click{})
		require.NoError(t, err)
	}
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		_, err := f.AppendAt(bt, "s", sec(-10), click{"older, this Update's"})
		require.NoError(t, err)
		_, err = f.AppendAt(bt, "s", sec(5), click{"newer, this Update's"})
		require.NoError(t, err)
		return f.TrimBefore(bt, "s", sec(1))
	}))
	require.Equal(t, []int64{5, 2, 1}, secondsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{}))))

	clock.Set(sec(100))
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		for range 3 {
			_, err := f.Append(bt, "s", click{})
			require.NoError(t, err)
		}
		return f.Trim(bt, "s", 2)
	}))
	require.Equal(t, []int64{100, 100}, secondsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{}))), "the two newest, both this Update's")

	// An Append after a trim, into the trimmed past, and a second trim.
	require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
		require.NoError(t, f.TrimBefore(bt, "s", sec(50)))
		_, err := f.AppendAt(bt, "s", sec(10), click{})
		require.NoError(t, err)
		require.NoError(t, f.TrimBefore(bt, "s", sec(50)))
		return f.Trim(bt, "s", 1)
	}))
	require.Equal(t, []int64{100}, secondsOf(testutil.Collect(t, f.Newest("s", tipkv.Query{}))))

	// A trim in an Update that fails drops nothing.
	boom := errors.New("boom")
	require.ErrorIs(t, db.Update(func(bt *tipkv.Batch) error {
		require.NoError(t, f.Trim(bt, "s", 0))
		return boom
	}), boom)
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 1)
	require.NoError(t, f.Trim(db, "s", 0))
	require.Empty(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})))
}

// Times a feed cannot write are ErrInvalid at the call, and write
// nothing: before the epoch, after MaxTime, from AppendAt, TrimBefore or
// the clock of Append. MaxTime itself leaves room for Append after it.
func testTimesOutOfRangeAreInvalid(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	_, err := f.Append(db, "s", click{"kept"})
	require.NoError(t, err)
	for _, bad := range []time.Time{{}, time.Unix(0, 0), time.Unix(-5, 0), versioned.MaxTime.Add(1), time.Unix(0, math.MaxInt64), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		_, err := f.AppendAt(db, "s", bad, click{})
		require.ErrorIs(t, err, tipkv.ErrInvalid, "AppendAt %v", bad)
		require.ErrorContains(t, err, `stream "s"`)
		require.ErrorIs(t, f.TrimBefore(db, "s", bad), tipkv.ErrInvalid, "TrimBefore %v", bad)
		clock.Set(bad)
		_, err = f.Append(db, "s", click{})
		require.ErrorIs(t, err, tipkv.ErrInvalid, "Append with the clock at %v", bad)
		require.ErrorContains(t, err, "the clock reads")
	}
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 1, "nothing was written or dropped")

	// The bounds themselves are written, and Append goes on after MaxTime.
	p, err := f.AppendAt(db, "s", versioned.MinTime, click{})
	require.NoError(t, err)
	require.Equal(t, int64(1), p)
	last, err := f.AppendAt(db, "s", versioned.MaxTime, click{})
	require.NoError(t, err)
	clock.Set(t0)
	for i := range 3 {
		p, err := f.Append(db, "s", click{})
		require.NoError(t, err)
		require.Equal(t, last+1+int64(i), p)
	}
	require.NoError(t, f.TrimBefore(db, "s", versioned.MaxTime))
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 4)
}

// A stream whose last event sits at the last nanosecond an int64 holds
// (older versions' AppendAt wrote one at the maximum time) keeps taking
// Appends: at the clock's time, as AppendAt places them.
func testAppendAfterAnEventAtTheLastNanosecond(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	val, err := codec.Msgpack[click]{}.Append(nil, click{"legacy"})
	require.NoError(t, err)
	rawSet(t, db, feedKey("s", math.MaxInt64-1), val)

	p, err := f.Append(db, "s", click{})
	require.NoError(t, err)
	require.Equal(t, int64(math.MaxInt64), p, "the one position left")
	for i := range 3 {
		p, err = f.Append(db, "s", click{})
		require.NoError(t, err)
		require.Equal(t, t0.UnixNano()+int64(i), p, "then the clock's time, ties one nanosecond apart")
	}
	clock.Set(t0.Add(time.Second))
	p, err = f.Append(db, "s", click{})
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Second).UnixNano(), p)
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 6)
}

// A Feed without a clock of its own reads the DB's (Options.Clock).
func testFeedUsesTheDBClock(t *testing.T, b backend) {
	db := b.Open(t, &tipkv.Options{Clock: func() time.Time { return t0 }})
	f, err := versioned.NewFeed[click](db, nil)
	require.NoError(t, err)
	p, err := f.Append(db, "s", click{})
	require.NoError(t, err)
	require.Equal(t, t0.UnixNano(), p)
}

func testPositionsContinueAfterReopen(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	clock := testutil.NewClock(t0)
	opts := &versioned.FeedOptions[click]{Clock: clock.Now}
	db := b.Open(t, nil)
	f, err := versioned.NewFeed(db, opts)
	require.NoError(t, err)
	for range 3 {
		_, err := f.Append(db, "s", click{})
		require.NoError(t, err)
	}
	db = b.Reopen(t, db, nil)
	f, err = versioned.NewFeed(db, opts)
	require.NoError(t, err)
	p, err := f.Append(db, "s", click{})
	require.NoError(t, err)
	require.Equal(t, t0.UnixNano()+3, p, "the last position is read back from the store")
}

// Trims racing with Appends, AppendAt into the past and each other, some
// in Updates that fail, on two handles when the backend has them: whatever
// the interleaving, every stored event was acknowledged at its position,
// and a trim once everything is quiet drops every event it should. A trim
// remembers how low the stream's events go so as not to step over old
// tombstones; an Append in flight must keep that bound low enough.
func testTrimsRacingAppends(t *testing.T, b backend) {
	clock := testutil.NewClock(t0)
	dbs := []*tipkv.DB{b.Open(t, nil)}
	if b.Second != nil {
		dbs = append(dbs, b.Second(t, dbs[0], nil))
	}
	var feeds []*versioned.Feed[click]
	for _, db := range dbs {
		f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now})
		require.NoError(t, err)
		feeds = append(feeds, f)
	}
	boom := errors.New("boom")
	var mu sync.Mutex
	acked := map[int64]map[string]bool{} // a trimmed position is free for AppendAt again
	ack := func(p int64, tag string) {
		mu.Lock()
		defer mu.Unlock()
		if acked[p] == nil {
			acked[p] = map[string]bool{}
		}
		acked[p][tag] = true
	}
	rounds := b.N(300)
	var wg sync.WaitGroup
	for g := range 4 {
		db, f := dbs[g%len(dbs)], feeds[g%len(dbs)]
		spawn(&wg, func() {
			for i := range rounds {
				tag := fmt.Sprintf("g%d-%d", g, i)
				var err error
				var p int64
				switch (g + i) % 6 {
				case 0:
					clock.Set(clock.Now().Add(time.Millisecond))
					p, err = f.Append(db, "s", click{tag})
				case 1:
					p, err = f.AppendAt(db, "s", t0.Add(-time.Duration(i*g)*time.Microsecond), click{tag})
				case 2:
					err = f.Trim(db, "s", 20)
				case 3:
					err = f.TrimBefore(db, "s", t0.Add(-time.Duration(150*g)*time.Microsecond))
				case 4:
					err = db.Update(func(bt *tipkv.Batch) error {
						if _, err := f.AppendAt(bt, "s", t0.Add(-time.Duration(500+i)*time.Microsecond), click{}); err != nil {
							return err
						}
						if err := f.Trim(bt, "s", 10); err != nil {
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
					p, err = f.Append(db, "s", click{tag})
				}
				if err != nil {
					t.Error(err)
					return
				}
				if p != 0 {
					ack(p, tag)
				}
			}
		})
	}
	wg.Wait()
	f, db := feeds[0], dbs[0]
	// What is stored was acknowledged at its position (or written by an
	// Update, with no tag).
	for _, e := range testutil.Collect(t, f.Newest("s", tipkv.Query{})) {
		if e.Value.Page != "" {
			require.True(t, acked[e.Position][e.Value.Page], "position %d holds %s", e.Position, e.Value.Page)
		}
	}
	// Once quiet, a trim drops all it should.
	cut := t0.Add(-200 * time.Microsecond)
	require.NoError(t, f.TrimBefore(db, "s", cut))
	for _, e := range testutil.Collect(t, f.Newest("s", tipkv.Query{})) {
		require.False(t, e.Time().Before(cut), "event at %v survived TrimBefore(%v)", e.Time(), cut)
	}
	require.NoError(t, f.Trim(db, "s", 5))
	require.Len(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), 5)
	require.NoError(t, f.Trim(db, "s", 0))
	require.Empty(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})))
}

// Two handles (two processes) append to one stream with clocks stuck at
// the same instant: every Append is acknowledged at a position of its
// own, and every acknowledged event is stored there.
func testSharedAppends(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	opts := &tipkv.Options{Clock: func() time.Time { return t0 }}
	dbA := b.Open(t, opts)
	dbs := []*tipkv.DB{dbA, b.Second(t, dbA, opts)}
	var mu sync.Mutex
	acked := map[int64]string{}
	each := b.N(100)
	var wg sync.WaitGroup
	for h, db := range dbs {
		f, err := versioned.NewFeed[click](db, nil)
		require.NoError(t, err)
		for g := range 2 {
			spawn(&wg, func() {
				for i := range each {
					tag := fmt.Sprintf("h%d-g%d-%d", h, g, i)
					var p int64
					var err error
					if i%4 == 3 {
						p, err = f.AppendAt(db, "s", t0.Add(-time.Second), click{tag})
					} else {
						p, err = f.Append(db, "s", click{tag})
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if prev, ok := acked[p]; ok {
						t.Errorf("position %d acknowledged twice: %s and %s", p, prev, tag)
					}
					acked[p] = tag
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, db := range dbs {
		f, err := versioned.NewFeed[click](db, nil)
		require.NoError(t, err)
		stored := map[int64]string{}
		for _, e := range testutil.Collect(t, f.Newest("s", tipkv.Query{})) {
			stored[e.Position] = e.Value.Page
		}
		require.Equal(t, acked, stored, "nothing lost, nothing more")
	}
	require.Len(t, acked, 4*each)
}

// A handle whose idea of a stream's last position is stale still writes
// a free one: the Append's condition fails, the handle reads the stream
// again, and the rerun takes the next free position.
func testSharedAppendAfterAnotherHandle(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	opts := &tipkv.Options{Clock: func() time.Time { return t0 }}
	dbA := b.Open(t, opts)
	dbB := b.Second(t, dbA, opts)
	fa, err := versioned.NewFeed[click](dbA, nil)
	require.NoError(t, err)
	fb, err := versioned.NewFeed[click](dbB, nil)
	require.NoError(t, err)
	n := t0.UnixNano()
	for i, step := range []struct {
		f  *versioned.Feed[click]
		db *tipkv.DB
	}{{fa, dbA}, {fb, dbB}, {fa, dbA}, {fa, dbA}, {fb, dbB}} {
		p, err := step.f.Append(step.db, "s", click{fmt.Sprint(i)})
		require.NoError(t, err)
		require.Equal(t, n+int64(i), p, "append %d", i)
	}
	require.NoError(t, fb.Trim(dbB, "s", 2))
	require.Equal(t, []int64{n + 4, n + 3}, positionsOf(testutil.Collect(t, fa.Newest("s", tipkv.Query{}))))
	require.NoError(t, fa.TrimBefore(dbA, "s", time.Unix(0, n+4)))
	require.Equal(t, []int64{n + 4}, positionsOf(testutil.Collect(t, fb.Newest("s", tipkv.Query{}))))
}
