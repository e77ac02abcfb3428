package tipkvtest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

func feedRetentionCases() []testCase {
	return []testCase{
		{"RetentionMaxEvents", checked(testRetentionMaxEvents)},
		{"RetentionMaxAge", checked(testRetentionMaxAge)},
		{"RetentionUnderConcurrentWriters", checked(testRetentionUnderConcurrentWriters)},
		{"RetentionInTheBackgroundAndAfterRestart", checked(testRetentionInTheBackground)},
	}
}

func retainingFeed(t testing.TB, db *tipkv.DB, clock *testutil.Clock, r versioned.FeedRetention) *versioned.Feed[click] {
	t.Helper()
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now, Retention: r})
	require.NoError(t, err)
	return f
}

func appendN(t testing.TB, db *tipkv.DB, f *versioned.Feed[click], clock *testutil.Clock, stream string, n int) []int64 {
	t.Helper()
	var ps []int64
	for range n {
		clock.Set(clock.Now().Add(time.Millisecond))
		p, err := f.Append(db, stream, click{stream})
		require.NoError(t, err)
		ps = append(ps, p)
	}
	return ps
}

func storedPositions(t testing.TB, f *versioned.Feed[click], stream string) []int64 {
	t.Helper()
	ps := positionsOf(testutil.Collect(t, f.Newest(stream, tipkv.Query{})))
	slices.Reverse(ps)
	return ps
}

// newestOf returns the last n of ps (ps oldest first).
func newestOf(ps []int64, n int) []int64 { return ps[max(len(ps)-n, 0):] }

// A pass keeps the newest MaxEvents events of every stream under the
// prefix, touches no stream outside it, and stops at a group's cursor.
func testRetentionMaxEvents(t *testing.T, b backend) {
	db := b.Open(t, nil)
	clock := testutil.NewClock(t0)
	for _, bad := range []versioned.FeedRetention{{MaxEvents: -1}, {MaxAge: -time.Second}} {
		_, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Retention: bad})
		require.ErrorIs(t, err, tipkv.ErrInvalid)
	}
	const keep = 5
	f := retainingFeed(t, db, clock, versioned.FeedRetention{Streams: "r/", MaxEvents: keep, Interval: -1})
	plain, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now})
	require.NoError(t, err)
	st, err := plain.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{}, st, "a feed without bounds retains nothing")

	n := max(b.N(40), 2*keep) // enough to trim at any scale
	written := map[string][]int64{}
	for i, s := range []string{"r/a", "r/b", "r/c", "r", "other"} {
		written[s] = appendN(t, db, f, clock, s, []int{n, keep, 2, n, n}[i])
	}
	require.NoError(t, f.Advance(db, "r/c", "g", 0, written["r/c"][0]))
	slow := appendN(t, db, f, clock, "r/c", n)
	require.NoError(t, f.Advance(db, "r/c", "g", written["r/c"][0], written["r/c"][1]))
	written["r/c"] = append(written["r/c"], slow...)

	st, err = f.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 3, Trimmed: 2}, st)
	require.Equal(t, newestOf(written["r/a"], keep), storedPositions(t, f, "r/a"))
	require.Equal(t, written["r/b"], storedPositions(t, f, "r/b"), "a stream at its bound keeps all")
	require.Equal(t, written["r/c"][2:], storedPositions(t, f, "r/c"), "the cursor of group g holds back the trim")
	require.Equal(t, written["r"], storedPositions(t, f, "r"), "not under the prefix r/")
	require.Equal(t, written["other"], storedPositions(t, f, "other"))

	require.NoError(t, f.DropGroup(db, "r/c", "g"))
	st, err = f.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 3, Trimmed: 1}, st)
	require.Equal(t, newestOf(written["r/c"], keep), storedPositions(t, f, "r/c"))

	st, err = f.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 3}, st, "a pass within bounds commits nothing")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = f.Retain(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

// MaxAge drops the events older than the clock's now minus MaxAge, and
// the bounds combine: the stricter one cuts.
func testRetentionMaxAge(t *testing.T, b backend) {
	db := b.Open(t, nil)
	clock := testutil.NewClock(t0)
	f := retainingFeed(t, db, clock, versioned.FeedRetention{MaxAge: time.Minute, Interval: -1})
	both := retainingFeed(t, db, clock, versioned.FeedRetention{Streams: "both", MaxAge: time.Minute, MaxEvents: 3, Interval: -1})
	var ps []int64
	for i := range 10 {
		p, err := f.AppendAt(db, "s", t0.Add(time.Duration(i)*time.Second), click{})
		require.NoError(t, err)
		ps = append(ps, p)
		_, err = f.AppendAt(db, "both", t0.Add(time.Duration(i)*time.Second), click{})
		require.NoError(t, err)
	}
	clock.Set(t0.Add(time.Minute + 4*time.Second)) // events before t0+4s are too old
	st, err := f.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 2, Trimmed: 2}, st)
	require.Equal(t, ps[4:], storedPositions(t, f, "s"))
	require.Len(t, storedPositions(t, f, "both"), 6)

	st, err = both.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 1, Trimmed: 1}, st)
	require.Len(t, storedPositions(t, f, "both"), 3)
	require.Equal(t, ps[4:], storedPositions(t, f, "s"), "outside the prefix both")

	clock.Set(t0.Add(time.Hour))
	_, err = f.Retain(context.Background())
	require.NoError(t, err)
	require.Empty(t, storedPositions(t, f, "s"))
	require.Empty(t, storedPositions(t, f, "both"))
}

// Passes running while writers of this process and (on a shared engine)
// another append never drop an event with fewer than MaxEvents newer ones
// in the store; after the writers stop, one pass leaves exactly the newest
// MaxEvents.
func testRetentionUnderConcurrentWriters(t *testing.T, b backend) {
	const keep = 8
	clock := testutil.NewClock(t0)
	dbs := []*tipkv.DB{b.Open(t, nil)}
	if b.Second != nil {
		dbs = append(dbs, b.Second(t, dbs[0], nil))
	}
	var feeds []*versioned.Feed[click]
	for _, db := range dbs {
		feeds = append(feeds, retainingFeed(t, db, clock, versioned.FeedRetention{MaxEvents: keep, Interval: -1}))
	}
	streams := []string{"a", "b", "c"}
	rounds := b.N(120)
	var mu sync.Mutex
	written := map[string][]int64{}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := range 4 {
		db, f := dbs[g%len(dbs)], feeds[g%len(dbs)]
		spawn(&wg, func() {
			for i := range rounds {
				s := streams[(g+i)%len(streams)]
				clock.Set(clock.Now().Add(time.Microsecond))
				p, err := f.Append(db, s, click{fmt.Sprint(g, i)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				written[s] = append(written[s], p)
				mu.Unlock()
			}
		})
	}
	var pg sync.WaitGroup
	passes := 0
	spawn(&pg, func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			// What writers had acknowledged before the pass is in the
			// store; a trim drops an event only below keep newer ones,
			// and nothing else drops events here.
			mu.Lock()
			before := map[string][]int64{}
			for s, ps := range written {
				before[s] = slices.Clone(ps)
			}
			mu.Unlock()
			if _, err := feeds[passes%len(feeds)].Retain(context.Background()); err != nil {
				t.Error(err)
				return
			}
			passes++
			for s, ps := range before {
				var stored []int64
				for e, err := range feeds[0].Newest(s, tipkv.Query{}) {
					if err != nil {
						t.Error(err)
						return
					}
					stored = append(stored, e.Position)
				}
				for _, p := range ps {
					newer := 0
					for _, q := range stored {
						if q > p {
							newer++
						}
					}
					if !slices.Contains(stored, p) && newer < keep {
						t.Errorf("stream %s: position %d is gone with only %d newer events stored: %v", s, p, newer, stored)
						return
					}
				}
			}
		}
	})
	wg.Wait()
	close(done)
	pg.Wait()
	require.NotZero(t, passes)
	_, err := feeds[len(feeds)-1].Retain(context.Background())
	require.NoError(t, err)
	for _, s := range streams {
		sorted := slices.Sorted(slices.Values(written[s]))
		require.Equal(t, newestOf(sorted, keep), storedPositions(t, feeds[0], s), "stream %s", s)
	}
}

// passLog is a slog handler that signals each record with message msg:
// each pass of a background retention trimmer or purge.
type passLog struct {
	msg    string
	passes chan struct{}
}

func newPassLog(msg string) passLog { return passLog{msg: msg, passes: make(chan struct{}, 1)} }

func (h passLog) Enabled(context.Context, slog.Level) bool { return true }
func (h passLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h passLog) WithGroup(string) slog.Handler            { return h }
func (h passLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.passes <- struct{}{}:
		default:
		}
	}
	return nil
}

// The background trimmer bounds the streams without a call, passes as soon
// as its Feed is created (so a restart trims what the store holds), and
// stops with Close.
func testRetentionInTheBackground(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	const keep = 4
	clock := testutil.NewClock(t0)
	db := b.Open(t, nil)
	f := retainingFeed(t, db, clock, versioned.FeedRetention{})
	appendN(t, db, f, clock, "s", 3*keep)
	appendN(t, db, f, clock, "t", 2*keep)

	log := newPassLog("tipkv: feed retention pass")
	opts := &tipkv.Options{Logger: slog.New(log)}
	db = b.Reopen(t, db, opts)
	f = retainingFeed(t, db, clock, versioned.FeedRetention{MaxEvents: keep, Interval: time.Millisecond})
	waitTrimmed := func(stream string) {
		t.Helper()
		deadline := time.After(2 * time.Minute) // a guard against a hang, not a window
		for len(storedPositions(t, f, stream)) > keep {
			select {
			case <-log.passes:
			case <-deadline:
				t.Fatalf("stream %s still holds %d events after two minutes of passes", stream, len(storedPositions(t, f, stream)))
			}
		}
	}
	waitTrimmed("s")
	waitTrimmed("t")
	ps := appendN(t, db, f, clock, "s", 2*keep)
	waitTrimmed("s")
	require.Equal(t, newestOf(ps, keep), storedPositions(t, f, "s"))
	require.NoError(t, db.Close())
}
