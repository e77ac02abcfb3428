package versioned

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
)

// Stale groups. A group whose consumer is gone keeps its cursor, and the
// cursor keeps every event after it from Trim and retention, for good. A
// retention pass that finds a group in its way (its cursor below the
// pass's cut) asks how long the group has left an event unhandled:
//
//	(Position, cut]           the events the group holds back
//	(Position, now - bound)   of them, those that have waited past the
//	                          bound: if there is one, the group is stale
//
// Positions are times, so this needs no time stored beside the cursor (a
// longer cursor value or a sibling key would be a format change, and a
// write more on every Advance). It is also the right measure: a group that
// has not advanced for a week but has nothing pending is idle, not stale,
// and holds nothing back; a group that advances every second but stays
// hours behind holds retention back as much as a dead one. Each check is
// one forward seek bounded on both sides, on every engine.
//
// A stale group is logged (Options.Logger, Warn) and counted
// (tipkv.FeedRetentionMetrics.StaleGroups); with
// FeedRetention.DropStaleGroups the pass drops it, if its cursor is still
// where the pass saw it, in an Update of its own before the trim. Its consumer then learns it from its
// next Advance (ErrConflict: the cursor is no longer where it was).

// defaultStaleGroups is FeedRetention.StaleGroups's default.
const defaultStaleGroups = time.Hour

// maxStaleWarnings bounds the warnings of one pass: after that many, the
// pass logs one more with the count of the others.
const maxStaleWarnings = 10

// staleBound returns the bound past which a group is stale, 0 for none.
func (r FeedRetention) staleBound() time.Duration {
	switch {
	case r.StaleGroups < 0:
		return 0
	case r.StaleGroups == 0:
		return defaultStaleGroups
	}
	return r.StaleGroups
}

// holdBack checks the groups of stream whose cursors hold a trim at cut
// back, warns about the stale ones and drops them when the retention
// says so, counting them in st; it returns the least cursor of the groups
// it left.
func (f *Feed[T]) holdBack(ctx context.Context, stream string, cut int64, st *RetainStats) (slowest int64, err error) {
	var held []Group
	slowest = math.MaxInt64
	err = scanCursors(f.store, stream, func(group string, pos int64) bool {
		if pos < cut {
			held = append(held, Group{Stream: stream, Name: group, Position: pos})
		} else {
			slowest = min(slowest, pos)
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	bound := f.retention.staleBound()
	if bound <= 0 || len(held) == 0 {
		for _, g := range held {
			slowest = min(slowest, g.Position)
		}
		return slowest, nil
	}
	now := f.clock()
	top := min(cut, now.UnixNano()-bound.Nanoseconds()-1)
	for _, g := range held {
		stale := false
		if top > g.Position {
			if stale, err = f.anyEvent(stream, span{top: top, bottom: g.Position + 1}); err != nil {
				return 0, err
			}
		}
		if !stale {
			slowest = min(slowest, g.Position)
			continue
		}
		dropped := false
		if f.retention.DropStaleGroups {
			var moved bool
			if dropped, moved, err = f.dropStale(g); err != nil {
				return 0, fmt.Errorf("group %q: %w", g.Name, err)
			}
			if moved {
				// Its consumer is alive after all; the trim reads its new
				// cursor.
				slowest = min(slowest, g.Position)
				continue
			}
		}
		if dropped {
			st.GroupsDropped++
		} else {
			st.StaleGroups++
			slowest = min(slowest, g.Position)
		}
		if st.StaleGroups+st.GroupsDropped <= maxStaleWarnings {
			f.warnStale(ctx, g, bound, dropped)
		}
	}
	return slowest, nil
}

// anyEvent reports whether stream holds an event in sp: one seek.
func (f *Feed[T]) anyEvent(stream string, sp span) (found bool, err error) {
	var sc newestScan
	if err := sc.open(f.store, namePrefix(codec.FamilyFeed, stream), sp, 1); err != nil {
		return false, err
	}
	found = sc.next()
	if cerr := sc.close(); sc.err == nil {
		err = cerr
	} else {
		err = sc.err
	}
	return found && err == nil, err
}

// dropStale deletes g's cursor if it is still at g.Position, in an Update
// of its own: moved when it is not (its consumer advanced meanwhile).
func (f *Feed[T]) dropStale(g Group) (dropped, moved bool, err error) {
	key := groupKey(g.Stream, g.Name)
	err = link.Write(f.db, func(tx *link.Tx) error {
		d, err := f.lockCursor(tx, key)
		if err != nil {
			return err
		}
		if err := f.expectCursor(tx, key, d, g.Position); err != nil {
			return err
		}
		d.latest, d.latestKnown, d.sh.guarded = 0, true, true
		return deletePoint(tx, key)
	})
	if errors.Is(err, tipkv.ErrConflict) {
		return false, true, nil
	}
	return err == nil, false, err
}

// warnStale logs one stale group.
func (f *Feed[T]) warnStale(ctx context.Context, g Group, bound time.Duration, dropped bool) {
	msg := "tipkv: stale consumer group holds feed retention back"
	if dropped {
		msg = "tipkv: stale consumer group dropped by feed retention"
	}
	f.w.ln.Logger.LogAttrs(ctx, slog.LevelWarn, msg,
		slog.String("event", "stale-group"), slog.String("stream", g.Stream), slog.String("group", g.Name),
		slog.Int64("position", g.Position), slog.Time("handled_until", time.Unix(0, g.Position).UTC()),
		slog.Duration("bound", bound), slog.Bool("dropped", dropped))
}

// passEnded logs the stale groups of a pass past maxStaleWarnings and
// records the pass's count of stale groups for Metrics (after a pass
// that completed: a partial count would read low).
func (f *Feed[T]) passEnded(ctx context.Context, st RetainStats, err error) {
	if n := st.StaleGroups + st.GroupsDropped - maxStaleWarnings; n > 0 {
		f.w.ln.Logger.LogAttrs(ctx, slog.LevelWarn, "tipkv: more stale consumer groups hold feed retention back",
			slog.String("event", "stale-groups"), slog.String("streams", f.retention.Streams), slog.Int("more", n))
	}
	f.w.dbm.groupsDropped.Add(uint64(st.GroupsDropped))
	if err == nil {
		f.w.dbm.stale.set(f.retention, st.StaleGroups)
	}
}

// staleGauge holds the count of stale groups of the latest completed pass
// of each retention (one per FeedRetention value: the background
// trimmers' key), for Metrics.
type staleGauge struct {
	mu sync.Mutex
	by map[FeedRetention]int
}

func (g *staleGauge) set(r FeedRetention, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.by == nil {
		g.by = map[FeedRetention]int{}
	}
	g.by[r] = n
}

// figures returns one entry per prefix of the retentions, sorted by it:
// the greatest count of the retentions of that prefix (they visit the same
// streams; a sum would count a group twice).
func (g *staleGauge) figures() []tipkv.FeedRetentionMetrics {
	g.mu.Lock()
	defer g.mu.Unlock()
	by := map[string]int64{}
	for r, n := range g.by {
		by[r.Streams] = max(by[r.Streams], int64(n))
	}
	var out []tipkv.FeedRetentionMetrics
	for streams, n := range by {
		out = append(out, tipkv.FeedRetentionMetrics{Streams: streams, StaleGroups: n})
	}
	slices.SortFunc(out, func(a, b tipkv.FeedRetentionMetrics) int { return cmp.Compare(a.Streams, b.Streams) })
	return out
}
