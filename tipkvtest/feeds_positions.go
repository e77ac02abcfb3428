package tipkvtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// A stream's positions never go back past a position it held, whatever
// dropped that event: a trim to empty, TrimBefore past the newest event,
// retention by age, a trim in the Update of the Appends it drops, or a
// trim of an event appended into the future. After the trim the DB is
// reopened (or, on an engine that cannot reopen, a second handle with no
// memory of the stream appends), and the clock reads a time before the
// dropped events: Append still places its event above them, so that a
// group's cursor, or a follower's position, at the old last event does
// not skip it.
func testPositionsStayAboveTrims(t *testing.T, b backend) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// fill appends the stream's events and returns its last position.
		fill func(t *testing.T, db *tipkv.DB, f *versioned.Feed[click], clock *testutil.Clock) int64
		// trim drops every event of the stream.
		trim func(t *testing.T, db *tipkv.DB, f *versioned.Feed[click], clock *testutil.Clock)
	}{
		{"Trim", appendThree, func(t *testing.T, db *tipkv.DB, f *versioned.Feed[click], _ *testutil.Clock) {
			require.NoError(t, f.Trim(db, "s", 0))
		}},
		{"TrimBefore", appendThree, func(t *testing.T, db *tipkv.DB, f *versioned.Feed[click], _ *testutil.Clock) {
			require.NoError(t, f.TrimBefore(db, "s", sec(3)))
		}},
		{"RetentionByAge", appendThree, func(t *testing.T, db *tipkv.DB, _ *versioned.Feed[click], clock *testutil.Clock) {
			r := retainingFeed(t, db, clock, versioned.FeedRetention{MaxAge: time.Minute, Interval: -1})
			clock.Set(sec(2).Add(2 * time.Minute))
			st, err := r.Retain(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, st.Trimmed)
		}},
		{"TrimInTheUpdateOfItsAppends", func(t *testing.T, db *tipkv.DB, f *versioned.Feed[click], clock *testutil.Clock) int64 {
			appendThree(t, db, f, clock)
			clock.Set(sec(5))
			require.NoError(t, db.Update(func(bt *tipkv.Batch) error {
				if _, err := f.Append(bt, "s", click{"own"}); err != nil {
					return err
				}
				return f.Trim(bt, "s", 0)
			}))
			return sec(5).UnixNano()
		}, func(*testing.T, *tipkv.DB, *versioned.Feed[click], *testutil.Clock) {}},
		{"AppendAtIntoTheFuture", func(t *testing.T, db *tipkv.DB, f *versioned.Feed[click], clock *testutil.Clock) int64 {
			appendThree(t, db, f, clock)
			p, err := f.AppendAt(db, "s", sec(100), click{"future"})
			require.NoError(t, err)
			return p
		}, func(t *testing.T, db *tipkv.DB, f *versioned.Feed[click], _ *testutil.Clock) {
			require.NoError(t, f.Trim(db, "s", 0))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if b.Reopen == nil && b.Second == nil {
				t.Skip("the backend can neither reopen a store nor open a second handle")
			}
			clock := testutil.NewClock(t0)
			opts := &versioned.FeedOptions[click]{Clock: clock.Now}
			db := b.Open(t, nil)
			f, err := versioned.NewFeed(db, opts)
			require.NoError(t, err)
			last := tc.fill(t, db, f, clock)
			require.NoError(t, f.Advance(db, "s", "g", 0, last))
			tc.trim(t, db, f, clock)
			require.Empty(t, testutil.Collect(t, f.Newest("s", tipkv.Query{})), "the trim dropped every event")
			require.NotContains(t, testutil.Collect(t, versioned.Streams(db)), "s", "a stream that holds only its mark is not listed")

			if b.Reopen != nil {
				db = b.Reopen(t, db, nil)
			} else {
				db = b.Second(t, db, nil) // memory of its own, as another process
			}
			f, err = versioned.NewFeed(db, opts)
			require.NoError(t, err)
			clock.Set(sec(1)) // behind the dropped events
			p, err := f.Append(db, "s", click{"after"})
			require.NoError(t, err)
			require.Greater(t, p, last, "Append after the trim went back past the stream's last position")
			q, err := f.Append(db, "s", click{"next"})
			require.NoError(t, err)
			require.Greater(t, q, p)

			cur, err := f.Cursor("s", "g")
			require.NoError(t, err)
			require.Equal(t, []int64{p, q}, positionsOf(testutil.Collect(t, f.Since("s", cur, tipkv.Query{}))),
				"the group's cursor sees the events appended after the trim")
			Healthy(t, db) // the stream's mark among its keys
		})
	}
}

func appendThree(t *testing.T, db *tipkv.DB, f *versioned.Feed[click], clock *testutil.Clock) int64 {
	t.Helper()
	var p int64
	for i := range 3 {
		clock.Set(sec(i))
		var err error
		p, err = f.Append(db, "s", click{})
		require.NoError(t, err)
	}
	require.Equal(t, sec(2).UnixNano(), p)
	return p
}

// On a shared engine another process's trim does not let a process's
// positions go back: A knows the stream up to its own event, B appends
// above it and trims the stream to empty, and A, its clock behind B's
// events, appends above them all the same (its commit fails on B's trim,
// and it reads the stream again). So does a third process that never saw
// the stream.
func testPositionsStayAboveAnotherProcessTrim(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	for _, tc := range []struct {
		name string
		trim func(f *versioned.Feed[click], db *tipkv.DB) error
	}{
		{"Trim", func(f *versioned.Feed[click], db *tipkv.DB) error { return f.Trim(db, "s", 0) }},
		{"TrimBefore", func(f *versioned.Feed[click], db *tipkv.DB) error { return f.TrimBefore(db, "s", sec(10)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testutil.NewClock(t0)
			opts := &versioned.FeedOptions[click]{Clock: clock.Now}
			dbA := b.Open(t, nil)
			dbB := b.Second(t, dbA, nil)
			fa, err := versioned.NewFeed(dbA, opts)
			require.NoError(t, err)
			fb, err := versioned.NewFeed(dbB, opts)
			require.NoError(t, err)

			_, err = fa.Append(dbA, "s", click{"a"})
			require.NoError(t, err)
			clock.Set(sec(5))
			for range 2 {
				_, err = fb.Append(dbB, "s", click{"b"})
				require.NoError(t, err)
			}
			require.NoError(t, tc.trim(fb, dbB))

			clock.Set(sec(1))
			p, err := fa.Append(dbA, "s", click{"a again"})
			require.NoError(t, err)
			require.Greater(t, p, sec(5).UnixNano()+1, "A's position went back past B's trimmed events")

			dbC := b.Second(t, dbA, nil)
			fc, err := versioned.NewFeed(dbC, opts)
			require.NoError(t, err)
			q, err := fc.Append(dbC, "s", click{"c"})
			require.NoError(t, err)
			require.Greater(t, q, p)
			Healthy(t, dbC)
		})
	}
}
