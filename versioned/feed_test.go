package versioned_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

type click struct {
	Page string `msgpack:"page"`
}

// fakeClock is a settable clock for Append.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func openFeed(t testing.TB) (*tipkv.DB, *versioned.Feed[click], *fakeClock) {
	t.Helper()
	db := testutil.OpenMem(t)
	clock := &fakeClock{now: t0}
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now})
	require.NoError(t, err)
	return db, f, clock
}

func positions(events []versioned.Event[click]) []int64 {
	var out []int64
	for _, e := range events {
		out = append(out, e.Position)
	}
	return out
}

func TestAppendPositionsFollowTheClock(t *testing.T) {
	db, f, clock := openFeed(t)
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

	events := collect(t, f.Newest("clicks", tipkv.Query{}))
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

func TestAppendAtTies(t *testing.T) {
	db, f, _ := openFeed(t)
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
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		for i := range 3 {
			p, err := f.AppendAt(b, "s", later, click{})
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

	all := positions(collect(t, f.Newest("s", tipkv.Query{})))
	require.Len(t, all, 10)
	require.True(t, slices.IsSortedFunc(all, func(a, b int64) int { return int(b - a) }))

	for _, bad := range []time.Time{{}, time.Unix(0, 0), time.Unix(-5, 0), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		_, err := f.AppendAt(db, "s", bad, click{})
		require.ErrorIs(t, err, tipkv.ErrInvalid, "%v", bad)
	}
}

func TestAbortedAppendsKeepPositionsUnique(t *testing.T) {
	db, f, _ := openFeed(t)
	boom := errors.New("boom")
	var lost int64
	err := db.Update(func(b *tipkv.Batch) error {
		var err error
		lost, err = f.Append(b, "s", click{"lost"})
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
	require.Len(t, collect(t, f.Newest("s", tipkv.Query{})), 2)
}

// Appends racing with a stuck clock, AppendAt ties and AppendAt in
// Updates of times that collide get unique positions.
func TestConcurrentAppendsAreUnique(t *testing.T) {
	db, f, _ := openFeed(t)
	const goroutines, appends = 8, 300
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range appends {
				var err error
				switch {
				case g%2 == 0:
					_, err = f.Append(db, "s", click{})
				case i%2 == 0:
					_, err = f.AppendAt(db, "s", t0.Add(-time.Hour), click{})
				default:
					err = db.Update(func(b *tipkv.Batch) error {
						_, err := f.AppendAt(b, "s", t0.Add(-time.Minute+time.Duration(i)), click{})
						return err
					})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	all := positions(collect(t, f.Newest("s", tipkv.Query{})))
	require.Len(t, all, goroutines*appends, "no event overwrote another")
}

func TestNewestAndBetween(t *testing.T) {
	db, f, _ := openFeed(t)
	for i := range 10 {
		_, err := f.AppendAt(db, "s", t0.Add(time.Duration(i)*time.Second), click{Page: string(rune('a' + i))})
		require.NoError(t, err)
	}
	sec := func(i int) int64 { return t0.Add(time.Duration(i) * time.Second).UnixNano() }

	require.Equal(t, []int64{sec(9), sec(8), sec(7)}, positions(collect(t, f.Newest("s", tipkv.Query{Limit: 3}))))
	require.Equal(t, []int64{sec(4), sec(3), sec(2)},
		positions(collect(t, f.Between("s", t0.Add(2*time.Second), t0.Add(5*time.Second), tipkv.Query{}))), "[from, to)")
	require.Equal(t, []int64{sec(4), sec(3)},
		positions(collect(t, f.Between("s", t0.Add(2*time.Second), t0.Add(5*time.Second), tipkv.Query{From: sec(3)}))), "and q's bounds")
	require.Empty(t, collect(t, f.Between("s", t0, t0, tipkv.Query{})))
	require.Empty(t, collect(t, f.Between("s", time.Time{}, t0, tipkv.Query{})))
	require.Len(t, collect(t, f.Between("s", time.Time{}, t0.Add(time.Hour), tipkv.Query{})), 10)
	require.Empty(t, collect(t, f.Newest("nothing", tipkv.Query{})))
	require.ErrorIs(t, readErr(f.Between("s", t0.Add(time.Second), t0, tipkv.Query{})), tipkv.ErrInvalid)

	// Pages of Between.
	q := tipkv.Query{Limit: 2}
	var got []int64
	for range 10 {
		page := collect(t, f.Between("s", t0.Add(time.Second), t0.Add(8*time.Second), q))
		if len(page) == 0 {
			break
		}
		got = append(got, positions(page)...)
		q.After = page[len(page)-1].Cursor()
	}
	require.Equal(t, []int64{sec(7), sec(6), sec(5), sec(4), sec(3), sec(2), sec(1)}, got)

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
		require.ErrorIs(t, readErr(f.Newest("s", q)), tipkv.ErrInvalid, name)
	}
	require.Empty(t, versioned.Event[click]{}.Cursor())
}

func TestTrim(t *testing.T) {
	db, f, clock := openFeed(t)
	dels := traceDeletes(t)
	appendN := func(n int) {
		for range n {
			clock.Set(clock.Now().Add(time.Second))
			_, err := f.Append(db, "s", click{})
			require.NoError(t, err)
		}
	}
	appendN(10)
	all := positions(collect(t, f.Newest("s", tipkv.Query{})))

	require.NoError(t, f.Trim(db, "s", 4))
	require.Equal(t, all[:4], positions(collect(t, f.Newest("s", tipkv.Query{}))))
	require.Len(t, dels.spans, 6, "one point delete an event")
	require.NoError(t, f.Trim(db, "s", 4))
	require.Len(t, dels.spans, 6, "nothing more to trim, no delete written")

	appendN(3)
	all = positions(collect(t, f.Newest("s", tipkv.Query{})))
	require.NoError(t, f.Trim(db, "s", 4))
	require.Equal(t, all[:4], positions(collect(t, f.Newest("s", tipkv.Query{}))))
	require.Len(t, dels.spans, 9)

	require.NoError(t, f.Trim(db, "s", 0))
	require.Empty(t, collect(t, f.Newest("s", tipkv.Query{})))
	dels.requireDisjoint(t)
	require.Len(t, dels.spans, 13)
	require.Zero(t, dels.rangeCount())
	require.ErrorIs(t, f.Trim(db, "s", -1), tipkv.ErrInvalid)
	require.NoError(t, f.Trim(db, "nothing", 3))

	// Positions go on after a trim to nothing.
	p, err := f.Append(db, "s", click{})
	require.NoError(t, err)
	require.Greater(t, p, all[0])
}

func TestTrimBefore(t *testing.T) {
	db, f, _ := openFeed(t)
	dels := traceDeletes(t)
	for i := range 10 {
		_, err := f.AppendAt(db, "s", t0.Add(time.Duration(i)*time.Second), click{})
		require.NoError(t, err)
	}
	require.NoError(t, f.TrimBefore(db, "s", t0.Add(3*time.Second)))
	got := positions(collect(t, f.Newest("s", tipkv.Query{})))
	require.Len(t, got, 7)
	require.Equal(t, t0.Add(3*time.Second).UnixNano(), got[6], "the event at t stays")
	require.Len(t, dels.spans, 3)

	require.NoError(t, f.TrimBefore(db, "s", t0.Add(3*time.Second)))
	require.NoError(t, f.TrimBefore(db, "s", t0))
	require.Len(t, dels.spans, 3, "nothing more to trim, no delete written")

	require.NoError(t, f.TrimBefore(db, "s", t0.Add(3*time.Second+1)))
	require.Len(t, collect(t, f.Newest("s", tipkv.Query{})), 6)
	require.NoError(t, f.TrimBefore(db, "s", t0.Add(time.Hour)))
	require.Empty(t, collect(t, f.Newest("s", tipkv.Query{})))
	require.Len(t, dels.spans, 10)
	dels.requireDisjoint(t)
}

// Long runs of events go with one range delete, starting where the last
// trim ended; events appended into the trimmed past are still found.
func TestTrimLongRunsWithOneRangeDelete(t *testing.T) {
	defer versioned.SetRangeDeleteMin(4)()
	db, f, _ := openFeed(t)
	dels := traceDeletes(t)
	sec := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	for i := range 20 {
		_, err := f.AppendAt(db, "s", sec(i), click{})
		require.NoError(t, err)
	}
	require.NoError(t, f.TrimBefore(db, "s", sec(3))) // 0..2: points
	require.NoError(t, f.Trim(db, "s", 10))           // 3..9: a range
	require.Equal(t, []bool{false, false, false, true}, dels.ranges)
	require.Equal(t, [2]int64{sec(3).UnixNano(), sec(9).UnixNano()}, dels.spans[3])

	// An event appended below the trims is still trimmed, with a point
	// delete, and no range covers the earlier ones.
	_, err := f.AppendAt(db, "s", sec(1).Add(time.Millisecond), click{})
	require.NoError(t, err)
	require.NoError(t, f.TrimBefore(db, "s", sec(15))) // 1.001 and 10..14
	require.Equal(t, []bool{false, false, false, true, true, false}, dels.ranges)
	require.Equal(t, seq(19, 15), secondsOf(collect(t, f.Newest("s", tipkv.Query{}))))
	dels.requireDisjoint(t)
}

func secondsOf(events []versioned.Event[click]) []int64 {
	var out []int64
	for _, e := range events {
		out = append(out, int64(e.Time().Sub(t0)/time.Second))
	}
	return out
}

// A trim inside an Update counts and drops the Update's own Appends.
func TestTrimInsideUpdateSeesOwnAppends(t *testing.T) {
	db, f, clock := openFeed(t)
	sec := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	for i := range 3 {
		_, err := f.AppendAt(db, "s", sec(i), click{})
		require.NoError(t, err)
	}
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		_, err := f.AppendAt(b, "s", sec(-10), click{"older, this Update's"})
		require.NoError(t, err)
		_, err = f.AppendAt(b, "s", sec(5), click{"newer, this Update's"})
		require.NoError(t, err)
		return f.TrimBefore(b, "s", sec(1))
	}))
	require.Equal(t, []int64{5, 2, 1}, secondsOf(collect(t, f.Newest("s", tipkv.Query{}))))

	clock.Set(sec(100))
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		for range 3 {
			_, err := f.Append(b, "s", click{})
			require.NoError(t, err)
		}
		return f.Trim(b, "s", 2)
	}))
	require.Equal(t, []int64{100, 100}, secondsOf(collect(t, f.Newest("s", tipkv.Query{}))), "the two newest, both this Update's")

	// An Append after a trim, into the trimmed past, and a second trim.
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, f.TrimBefore(b, "s", sec(50)))
		_, err := f.AppendAt(b, "s", sec(10), click{})
		require.NoError(t, err)
		require.NoError(t, f.TrimBefore(b, "s", sec(50)))
		return f.Trim(b, "s", 1)
	}))
	require.Equal(t, []int64{100}, secondsOf(collect(t, f.Newest("s", tipkv.Query{}))))

	// A trim in an Update that fails drops nothing.
	boom := errors.New("boom")
	require.ErrorIs(t, db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, f.Trim(b, "s", 0))
		return boom
	}), boom)
	require.Len(t, collect(t, f.Newest("s", tipkv.Query{})), 1)
	require.NoError(t, f.Trim(db, "s", 0))
	require.Empty(t, collect(t, f.Newest("s", tipkv.Query{})))
}

// Times a feed cannot write are ErrInvalid at the call, and write
// nothing: before the epoch, after MaxTime, from AppendAt, TrimBefore or
// the clock of Append. MaxTime itself leaves room for Append after it.
func TestTimesOutOfRangeAreInvalid(t *testing.T) {
	db, f, clock := openFeed(t)
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
	require.Len(t, collect(t, f.Newest("s", tipkv.Query{})), 1, "nothing was written or dropped")

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
	require.Len(t, collect(t, f.Newest("s", tipkv.Query{})), 4)
}

// A stream whose last event sits at the last nanosecond an int64 holds
// (older versions' AppendAt wrote one at the maximum time) keeps taking
// Appends: at the clock's time, as AppendAt places them.
func TestAppendAfterAnEventAtTheLastNanosecond(t *testing.T) {
	db, f, clock := openFeed(t)
	key := codec.AppendDesc(codec.AppendString([]byte{byte(codec.FamilyFeed)}, "s"), math.MaxInt64-1)
	val, err := codec.Msgpack[click]{}.Append(nil, click{"legacy"})
	require.NoError(t, err)
	rawSet(t, db, key, val)

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
	require.Len(t, collect(t, f.Newest("s", tipkv.Query{})), 6)
}

// A Feed without a clock of its own reads the DB's (Options.Clock).
func TestFeedUsesTheDBClock(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, Clock: func() time.Time { return t0 }})
	require.NoError(t, err)
	defer db.Close()
	f, err := versioned.NewFeed[click](db, nil)
	require.NoError(t, err)
	p, err := f.Append(db, "s", click{})
	require.NoError(t, err)
	require.Equal(t, t0.UnixNano(), p)
}

func TestPositionsContinueAfterReopen(t *testing.T) {
	db, dir := testutil.OpenDir(t, nil)
	clock := &fakeClock{now: t0}
	opts := &versioned.FeedOptions[click]{Clock: clock.Now}
	f, err := versioned.NewFeed(db, opts)
	require.NoError(t, err)
	for range 3 {
		_, err := f.Append(db, "s", click{})
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	db, err = tipkv.Open(dir, nil)
	require.NoError(t, err)
	defer db.Close()
	f, err = versioned.NewFeed(db, opts)
	require.NoError(t, err)
	p, err := f.Append(db, "s", click{})
	require.NoError(t, err)
	require.Equal(t, t0.UnixNano()+3, p, "the last position is read back from the store")
}

func TestFeedBadInput(t *testing.T) {
	db, f, _ := openFeed(t)
	_, err := f.Append(db, "", click{})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = f.Append(db, strings.Repeat("s", versioned.MaxNameSize+1), click{})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.ErrorIs(t, readErr(f.Newest("", tipkv.Query{})), tipkv.ErrInvalid)
	require.ErrorIs(t, f.Trim(db, "", 1), tipkv.ErrInvalid)
	require.ErrorIs(t, f.TrimBefore(db, "", t0), tipkv.ErrInvalid)
	_, err = versioned.NewFeed[click](nil, nil)
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	raw, err := versioned.NewFeed[[]byte](db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	_, err = raw.Append(db, "big", make([]byte, versioned.MaxValueSize+1))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Empty(t, collect(t, raw.Newest("big", tipkv.Query{})))

	// Stream names are bytes too.
	p, err := raw.Append(db, "\x00\xff", []byte("x"))
	require.NoError(t, err)
	ev := collect(t, raw.Newest("\x00\xff", tipkv.Query{}))
	require.Len(t, ev, 1)
	require.Equal(t, p, ev[0].Position)
	require.Equal(t, []byte("x"), ev[0].Value)

	// An event that does not decode.
	key := codec.AppendDesc(codec.AppendString([]byte{byte(codec.FamilyFeed)}, "bad"), 5)
	rawSet(t, db, key, []byte{0xc1})
	err = readErr(f.Newest("bad", tipkv.Query{}))
	require.ErrorIs(t, err, tipkv.ErrCorrupt)
	require.ErrorContains(t, err, `stream "bad": position 5`)
}
