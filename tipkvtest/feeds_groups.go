package tipkvtest

import (
	"context"
	"flag"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

var groupsSeed = flag.Uint64("groups.seed", 0, "seed of the consumer groups model test (0: from the clock)")

// groupCases returns the tests of listing consumer groups, their backlogs,
// and stale groups in retention.
func groupCases() []testCase {
	return []testCase{
		{"GroupsListedAcrossStreams", checked(testGroupsListedAcrossStreams)},
		{"GroupBacklogMatchesModel", checked(testGroupBacklogMatchesModel)},
		{"StaleGroupWarnedNeverDroppedByDefault", checked(testStaleGroupWarned)},
		{"StaleGroupDroppedWhenAsked", checked(testStaleGroupDropped)},
	}
}

// groupID names a group for comparisons.
type groupID struct {
	Stream, Name string
	Position     int64
}

func groupIDs(t testing.TB, seq func(func(versioned.Group, error) bool)) []groupID {
	t.Helper()
	var out []groupID
	for _, g := range testutil.Collect(t, seq) {
		out = append(out, groupID{g.Stream, g.Name, g.Position})
	}
	return out
}

// AllGroups yields the groups of every stream of the DB, ordered by
// stream and then name bytewise (names that are prefixes of each other or
// hold zero bytes included), from any Feed handle whatever its type and
// from another process; Groups yields one stream's with Stream set; a
// dropped group is gone from both.
func testGroupsListedAcrossStreams(t *testing.T, b backend) {
	db, f, clock := openFeed(t, b)
	require.Empty(t, testutil.Collect(t, f.AllGroups()), "a DB without groups")
	streams := []string{"b", "a", "a\x00", "ab", "a\x00b"}
	var want []groupID
	for i, s := range streams {
		clock.Set(sec(i))
		p, err := f.Append(db, s, click{s})
		require.NoError(t, err)
		for _, g := range []string{"x", "g", "g\x00", "gg"}[:1+i%4] {
			require.NoError(t, f.Advance(db, s, g, 0, p))
			want = append(want, groupID{s, g, p})
		}
	}
	slices.SortFunc(want, func(a, b groupID) int {
		if c := compareBytes(a.Stream, b.Stream); c != 0 {
			return c
		}
		return compareBytes(a.Name, b.Name)
	})
	require.Equal(t, want, groupIDs(t, f.AllGroups()))
	other, err := versioned.NewFeed[tick](db, nil)
	require.NoError(t, err)
	require.Equal(t, want, groupIDs(t, other.AllGroups()), "streams are not typed")
	var ofA []groupID
	for _, g := range want {
		if g.Stream == "a" {
			ofA = append(ofA, g)
		}
	}
	require.Equal(t, ofA, groupIDs(t, f.Groups("a")))

	// Stopping early is allowed.
	for range f.AllGroups() {
		break
	}
	require.NoError(t, f.DropGroup(db, want[0].Stream, want[0].Name))
	require.Equal(t, want[1:], groupIDs(t, f.AllGroups()))
	if b.Second != nil {
		db2 := b.Second(t, db, nil)
		f2, err := versioned.NewFeed[click](db2, nil)
		require.NoError(t, err)
		require.Equal(t, want[1:], groupIDs(t, f2.AllGroups()))
		require.NoError(t, f2.Advance(db2, "z", "from-2", 0, 1))
		require.Equal(t, append(slices.Clone(want[1:]), groupID{"z", "from-2", 1}), groupIDs(t, f.AllGroups()))
	}
}

func compareBytes(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// groupsModel is what the backlog model test expects: the stored
// positions of each stream, oldest first, and the cursors.
type groupsModel struct {
	stored  map[string][]int64
	cursors map[[2]string]int64
}

func (m *groupsModel) slowest(stream string) int64 {
	s := int64(math.MaxInt64)
	for k, c := range m.cursors {
		if k[0] == stream {
			s = min(s, c)
		}
	}
	return s
}

// backlog is what Backlog(stream, group, limit) must return.
func (m *groupsModel) backlog(stream, group string, limit int) versioned.Group {
	g := versioned.Group{Stream: stream, Name: group, Position: m.cursors[[2]string{stream, group}]}
	ps := m.stored[stream]
	if len(ps) > 0 {
		g.Newest = ps[len(ps)-1]
	}
	i := sort.Search(len(ps), func(i int) bool { return ps[i] > g.Position })
	pending := ps[i:]
	if len(pending) > 0 {
		g.Oldest = pending[0]
	}
	g.Pending = len(pending)
	if limit > 0 && g.Pending > limit {
		g.Pending, g.More = limit, true
	}
	return g
}

// Backlog's count, oldest pending position, newest position and More
// agree with a model through random appends (now and into the past),
// advances, trims that stop at cursors and trims past them, and drops;
// AllGroups lists the model's cursors. Rerun a failure with its seed
// (-groups.seed).
func testGroupBacklogMatchesModel(t *testing.T, b backend) {
	seed := *groupsSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -groups.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	db, f, clock := openFeed(t, b)
	past, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now, TrimPastCursors: true})
	require.NoError(t, err)
	m := &groupsModel{stored: map[string][]int64{}, cursors: map[[2]string]int64{}}
	streams := []string{"s", "t"}
	groups := []string{"g1", "g2", "g3"}
	at := t0
	ops := b.N(300)
	for op := range ops {
		s := streams[rng.IntN(len(streams))]
		g := groups[rng.IntN(len(groups))]
		key := [2]string{s, g}
		switch r := rng.IntN(20); {
		case r < 9: // append now
			at = at.Add(time.Duration(1+rng.IntN(1000)) * time.Microsecond)
			clock.Set(at)
			p, err := f.Append(db, s, click{})
			require.NoError(t, err)
			m.stored[s] = append(m.stored[s], p)
		case r < 10: // append into the past, between stored events
			ps := m.stored[s]
			if len(ps) == 0 {
				continue
			}
			p, err := f.AppendAt(db, s, time.Unix(0, ps[rng.IntN(len(ps))]), click{})
			require.NoError(t, err)
			i, found := slices.BinarySearch(ps, p)
			require.False(t, found, "AppendAt took a stored position")
			m.stored[s] = slices.Insert(ps, i, p)
		case r < 15: // advance to a stored event, or past the newest
			from, ok := m.cursors[key]
			ps := m.stored[s]
			i := sort.Search(len(ps), func(i int) bool { return ps[i] > from })
			to := from
			if i < len(ps) {
				to = ps[i+rng.IntN(len(ps)-i)]
			}
			if !ok && to == 0 {
				to = 1
			}
			require.NoError(t, f.Advance(db, s, g, from, to))
			m.cursors[key] = to
		case r < 17: // trim, never past a cursor
			keep := rng.IntN(8)
			ps := m.stored[s]
			cut := int64(0)
			if len(ps) > keep {
				cut = ps[len(ps)-keep-1]
			}
			require.NoError(t, f.Trim(db, s, keep))
			cut = min(cut, m.slowest(s))
			m.stored[s] = slices.DeleteFunc(ps, func(p int64) bool { return p <= cut })
		case r < 18: // trim past the cursors
			keep := rng.IntN(8) + 4
			ps := m.stored[s]
			if len(ps) > keep {
				m.stored[s] = slices.Clone(ps[len(ps)-keep:])
			}
			require.NoError(t, past.Trim(db, s, keep))
		default:
			require.NoError(t, f.DropGroup(db, s, g))
			delete(m.cursors, key)
		}
		if op%5 != 0 && op != ops-1 {
			continue
		}
		var want []groupID
		for k, c := range m.cursors {
			want = append(want, groupID{k[0], k[1], c})
		}
		slices.SortFunc(want, func(a, b groupID) int {
			if c := compareBytes(a.Stream, b.Stream); c != 0 {
				return c
			}
			return compareBytes(a.Name, b.Name)
		})
		require.Equal(t, want, groupIDs(t, f.AllGroups()), "op %d", op)
		for _, s := range streams {
			require.Equal(t, slices.Clip(append([]int64(nil), m.stored[s]...)), storedPositions(t, f, s), "op %d: stream %s", op, s)
			for _, g := range groups {
				limit := []int{0, 1, 3, 10}[rng.IntN(4)]
				got, err := f.Backlog(s, g, limit)
				if _, ok := m.cursors[[2]string{s, g}]; !ok {
					require.ErrorIs(t, err, tipkv.ErrNotFound, "op %d: %s/%s", op, s, g)
					continue
				}
				require.NoError(t, err)
				want := m.backlog(s, g, limit)
				require.Equal(t, want, got, "op %d: %s/%s limit %d", op, s, g, limit)
				require.Equal(t, time.Duration(max(want.Newest-want.Position, 0)), got.Lag())
				if want.Oldest > 0 {
					require.Equal(t, time.Second, got.PendingAge(time.Unix(0, want.Oldest).Add(time.Second)))
				} else {
					require.Zero(t, got.PendingAge(at.Add(time.Hour)))
				}
			}
		}
	}
}

// staleLog records the stale-group warnings.
type staleLog struct {
	mu      sync.Mutex
	records []map[string]any
}

func (h *staleLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *staleLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *staleLog) WithGroup(string) slog.Handler            { return h }
func (h *staleLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	a := map[string]any{"msg": r.Message}
	r.Attrs(func(x slog.Attr) bool {
		a[x.Key] = x.Value.Any()
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, a)
	h.mu.Unlock()
	return nil
}

// take returns the records so far and forgets them.
func (h *staleLog) take() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.records
	h.records = nil
	return r
}

// staleSetup writes stream "s" (events at t0+0s..4s, newest kept 2),
// group "live" caught up, group "dead" at the first event, and on stream
// "quiet" a group caught up long ago.
func staleSetup(t *testing.T, b backend) (*tipkv.DB, *testutil.Clock, *staleLog, []int64) {
	log := &staleLog{}
	clock := testutil.NewClock(t0)
	db := b.Open(t, &tipkv.Options{Clock: clock.Now, Logger: slog.New(log)})
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now})
	require.NoError(t, err)
	var ps []int64
	for i := range 5 {
		clock.Set(sec(i))
		p, err := f.Append(db, "s", click{})
		require.NoError(t, err)
		ps = append(ps, p)
	}
	require.NoError(t, f.Advance(db, "s", "live", 0, ps[4]))
	require.NoError(t, f.Advance(db, "s", "dead", 0, ps[0]))
	q, err := f.Append(db, "quiet", click{})
	require.NoError(t, err)
	require.NoError(t, f.Advance(db, "quiet", "idle", 0, q))
	return db, clock, log, ps
}

// staleGauge returns the stale groups Metrics report for the retention
// of every stream (Streams "").
func staleGauge(t *testing.T, db *tipkv.DB) int64 {
	t.Helper()
	m, err := db.Metrics()
	require.NoError(t, err)
	for _, r := range m.Feeds.Retentions {
		if r.Streams == "" {
			return r.StaleGroups
		}
	}
	require.Fail(t, "no figures for the retention of every stream", "%+v", m.Feeds.Retentions)
	return 0
}

// A group that holds a retention pass back is stale once an event it has
// not handled has waited past FeedRetention.StaleGroups (on the injected
// clock): the pass warns through Options.Logger and Metrics counts it,
// but drops nothing past its cursor; a group that holds back only recent
// events, and an idle group with nothing pending, are never stale.
func testStaleGroupWarned(t *testing.T, b backend) {
	db, clock, log, ps := staleSetup(t, b)
	for _, bad := range []versioned.FeedRetention{{MaxEvents: 2, DropStaleGroups: true, StaleGroups: -1}} {
		_, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Retention: bad})
		require.ErrorIs(t, err, tipkv.ErrInvalid)
	}
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now,
		Retention: versioned.FeedRetention{MaxEvents: 2, Interval: -1, StaleGroups: 10 * time.Minute}})
	require.NoError(t, err)

	clock.Set(sec(4).Add(9 * time.Minute)) // dead's oldest pending event (1s) has waited 9m3s
	st, err := f.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 2, Trimmed: 1}, st, "dead holds back, within the bound")
	require.Equal(t, ps[1:], storedPositions(t, f, "s"))
	require.Empty(t, log.take())
	require.Zero(t, staleGauge(t, db))

	clock.Set(sec(1).Add(10*time.Minute + time.Nanosecond))
	st, err = f.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 2, StaleGroups: 1}, st)
	require.Equal(t, ps[1:], storedPositions(t, f, "s"), "a stale group is never dropped by default")
	recs := log.take()
	require.Len(t, recs, 1)
	require.Equal(t, "stale-group", recs[0]["event"])
	require.Equal(t, "s", recs[0]["stream"])
	require.Equal(t, "dead", recs[0]["group"])
	require.Equal(t, ps[0], recs[0]["position"])
	require.Equal(t, false, recs[0]["dropped"])
	require.EqualValues(t, 1, staleGauge(t, db))
	quiet, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now,
		Retention: versioned.FeedRetention{Streams: "quiet", MaxEvents: 2, Interval: -1, StaleGroups: 10 * time.Minute}})
	require.NoError(t, err)
	_, err = quiet.Retain(context.Background())
	require.NoError(t, err)
	m, err := db.Metrics()
	require.NoError(t, err)
	require.Equal(t, []tipkv.FeedRetentionMetrics{{Streams: "", StaleGroups: 1}, {Streams: "quiet"}}, m.Feeds.Retentions,
		"one gauge per prefix of the streams a retention bounds")
	c, err := f.Cursor("s", "dead")
	require.NoError(t, err)
	require.Equal(t, ps[0], c)

	// Bounds: a negative one warns of nothing; the default is one hour.
	for _, tc := range []struct {
		bound time.Duration
		stale int
	}{{-1, 0}, {0, 0}} {
		g, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now,
			Retention: versioned.FeedRetention{MaxEvents: 2, Interval: -1, StaleGroups: tc.bound}})
		require.NoError(t, err)
		st, err = g.Retain(context.Background())
		require.NoError(t, err)
		require.Equal(t, tc.stale, st.StaleGroups, "bound %v", tc.bound)
	}
	clock.Set(sec(1).Add(time.Hour + time.Nanosecond))
	def, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now,
		Retention: versioned.FeedRetention{MaxEvents: 2, Interval: -1}})
	require.NoError(t, err)
	st, err = def.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.StaleGroups, "past the default hour")
	log.take()

	// The group handles its events: not stale any more, and the gauge
	// reads so after the next pass.
	require.NoError(t, f.Advance(db, "s", "dead", ps[0], ps[4]))
	st, err = f.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 2, Trimmed: 1}, st)
	require.Empty(t, log.take())
	_, err = def.Retain(context.Background())
	require.NoError(t, err)
	require.Zero(t, staleGauge(t, db))
}

// With DropStaleGroups a pass drops a stale group that holds it back and
// trims past where it was; the group's consumer learns it at its next
// Advance (ErrConflict). Metrics count the drop.
func testStaleGroupDropped(t *testing.T, b backend) {
	db, clock, log, ps := staleSetup(t, b)
	f, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{Clock: clock.Now,
		Retention: versioned.FeedRetention{MaxEvents: 2, Interval: -1, StaleGroups: time.Minute, DropStaleGroups: true}})
	require.NoError(t, err)
	clock.Set(sec(1).Add(time.Minute - time.Nanosecond))
	st, err := f.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 2, Trimmed: 1}, st, "within the bound: kept")
	require.Equal(t, ps[1:], storedPositions(t, f, "s"))

	clock.Set(sec(1).Add(time.Minute + time.Nanosecond))
	st, err = f.Retain(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.RetainStats{Streams: 2, Trimmed: 1, GroupsDropped: 1}, st)
	require.Equal(t, ps[3:], storedPositions(t, f, "s"), "trimmed past the dropped group")
	recs := log.take()
	require.Len(t, recs, 1)
	require.Equal(t, "dead", recs[0]["group"])
	require.Equal(t, true, recs[0]["dropped"])
	_, err = f.Backlog("s", "dead", 0)
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.ErrorIs(t, f.Advance(db, "s", "dead", ps[0], ps[1]), tipkv.ErrConflict, "the late consumer is told")
	live, err := f.Backlog("s", "live", 0)
	require.NoError(t, err)
	require.Equal(t, ps[4], live.Position, "a live group is kept")
	_, err = f.Backlog("quiet", "idle", 0)
	require.NoError(t, err, "an idle group is kept")
	m, err := db.Metrics()
	require.NoError(t, err)
	require.EqualValues(t, 1, m.Retention.GroupsDropped)
	require.Equal(t, []tipkv.FeedRetentionMetrics{{Streams: ""}}, m.Feeds.Retentions, "a dropped group holds nothing back")
	require.Equal(t, []groupID{{"quiet", "idle", mustCursor(t, f, "quiet", "idle")}, {"s", "live", ps[4]}},
		groupIDs(t, f.AllGroups()))

	// A group that advances after the pass found it stale and before the
	// drop is kept: the drop requires the cursor the pass saw. (The pass
	// reads the Feed's clock between the two: that is where it moves.)
	qs := appendN(t, db, f, clock, "s", 3)
	require.NoError(t, f.Advance(db, "s", "live", ps[4], qs[2]))
	require.NoError(t, f.Advance(db, "s", "late", 0, ps[4]))
	clock.Set(clock.Now().Add(time.Hour))
	var armed, moved bool
	racing, err := versioned.NewFeed[click](db, &versioned.FeedOptions[click]{
		Clock: func() time.Time {
			if armed && !moved {
				moved = true
				require.NoError(t, f.Advance(db, "s", "late", ps[4], qs[2]))
			}
			return clock.Now()
		},
		Retention: versioned.FeedRetention{MaxEvents: 2, Interval: -1, StaleGroups: time.Minute, DropStaleGroups: true}})
	require.NoError(t, err)
	armed = true
	st, err = racing.Retain(context.Background())
	require.NoError(t, err)
	require.True(t, moved)
	require.Equal(t, versioned.RetainStats{Streams: 2, Trimmed: 1}, st, "late moved: neither dropped nor stale")
	require.Equal(t, qs[2], mustCursor(t, f, "s", "late"))
	require.Equal(t, qs[1:], storedPositions(t, f, "s"))
}

func mustCursor(t *testing.T, f *versioned.Feed[click], stream, group string) int64 {
	t.Helper()
	c, err := f.Cursor(stream, group)
	require.NoError(t, err)
	return c
}
