package versioned

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// FeedRetention bounds the streams of a feed by count and by age, without
// a job of the caller's: a Feed opened with one trims them in the
// background (see FeedOptions.Retention and Feed.Retain).
//
// Every trim is Trim's: it never drops an event a group's cursor has not
// passed (unless FeedOptions.TrimPastCursors), never one of the newest
// MaxEvents, and drops what it drops with range deletes.
type FeedRetention struct {
	// Streams is the prefix of the names of the streams the bounds apply
	// to; the empty prefix is every stream of the DB. Every Feed of a DB
	// writes to the same streams (a stream is named, not typed), so give
	// a feed whose streams need other bounds a prefix of its own.
	Streams string

	// MaxEvents, when above zero, keeps the newest MaxEvents events of
	// each stream and drops the older ones.
	MaxEvents int

	// MaxAge, when above zero, drops the events older than MaxAge: those
	// whose position (a time, see Event.Time) is before the clock's now
	// minus MaxAge.
	MaxAge time.Duration

	// Interval is the time between two passes of the background trimmer,
	// which also passes once when the Feed is created, so the bounds hold
	// again soon after a restart. The default (0) is one minute. Below
	// zero there is no background trimmer: call Retain.
	//
	// Between passes a stream may hold more than MaxEvents events and
	// events older than MaxAge: the bounds hold after each pass, not at
	// every commit. Reads do not hide what a pass has not dropped yet.
	Interval time.Duration

	// StaleGroups is how long a consumer group may leave an event
	// unhandled while its cursor holds a pass back (the pass would drop
	// the event but for the group): past it, the group is stale. Each
	// pass logs the stale groups it meets (Options.Logger, Warn, at most
	// ten by name) and counts them in tipkv.FeedRetentionMetrics.StaleGroups. An
	// idle group with nothing pending is never stale, however long ago it
	// advanced. The default (0) is one hour; below zero no group is
	// stale. See groups_stale.go.
	StaleGroups time.Duration

	// DropStaleGroups lets a pass drop the stale groups it meets (as
	// DropGroup does, but only a group whose cursor has not moved since
	// the pass read it), so that retention goes on. The consumer of a
	// dropped group finds out at its next Advance, which fails with
	// ErrConflict. The default (false) warns and drops nothing.
	DropStaleGroups bool
}

func (r FeedRetention) active() bool { return r.MaxEvents > 0 || r.MaxAge > 0 }

func (r FeedRetention) check() error {
	switch {
	case r.MaxEvents < 0:
		return fmt.Errorf("%w: FeedRetention.MaxEvents %d", tipkv.ErrInvalid, r.MaxEvents)
	case r.MaxAge < 0:
		return fmt.Errorf("%w: FeedRetention.MaxAge %v", tipkv.ErrInvalid, r.MaxAge)
	case r.DropStaleGroups && r.StaleGroups < 0:
		return fmt.Errorf("%w: FeedRetention.DropStaleGroups with no stale bound (StaleGroups %v)", tipkv.ErrInvalid, r.StaleGroups)
	case len(r.Streams) > MaxNameSize:
		return fmt.Errorf("%w: FeedRetention.Streams of %d bytes is over the limit of %d", tipkv.ErrInvalid, len(r.Streams), MaxNameSize)
	}
	return nil
}

// RetainStats says what one pass of Retain did.
type RetainStats struct {
	Streams int // streams visited
	Trimmed int // streams it dropped events from
	// Stale groups it met (see FeedRetention.StaleGroups): those it left,
	// holding the trim back, and those it dropped.
	StaleGroups, GroupsDropped int
}

// retainPage is how many streams a pass reads with one iterator before it
// trims them: the iterator is closed before any trim, so a pass pins no
// snapshot for long and holds at most this many names in memory.
const retainPage = 256

// Retain runs one pass of the Feed's retention (FeedOptions.Retention)
// now: it visits every stream under Retention.Streams, one seek each, and
// trims in an Update of its own each stream that holds more than
// MaxEvents events or events older than MaxAge, as far as the groups'
// cursors allow. Appends to the stream do not wait for it; finding the
// cut with MaxEvents reads the positions of the newest MaxEvents+1
// events of the stream.
//
// It stops early with ctx's error, and returns ErrClosed once the DB has
// closed. Without a bound in the Feed's Retention it does nothing. The
// background trimmer calls it every Retention.Interval; a caller that
// sets a negative Interval calls it when it likes.
func (f *Feed[T]) Retain(ctx context.Context) (st RetainStats, err error) {
	if !f.retention.active() {
		return st, nil
	}
	defer func() {
		countPass(&f.w.dbm.feedPasses, &f.w.dbm.feedFailures, err)
		f.w.dbm.trimmed.Add(uint64(st.Trimmed))
		f.passEnded(ctx, st, err)
	}()
	if f.w.isClosed() {
		return st, tipkv.ErrClosed
	}
	lo := appendEscaped(codec.AppendFamily(nil, codec.FamilyFeed), f.retention.Streams)
	var names []string
	err = walkPrefixes(f.store, lo, codec.PrefixEnd(lo), retainPage, func(it engine.Iter) error {
		name, rest, err := codec.DecodeString(it.Key()[1:])
		if err != nil {
			return fmt.Errorf("key %x: %w", it.Key(), err)
		}
		if !isMarkSuffix(rest) { // a stream trimmed to empty holds nothing to trim
			names = append(names, name)
		}
		return nil
	}, func() error {
		// The page's iterator is closed: trim its streams.
		for _, name := range names {
			if err := ctx.Err(); err != nil {
				return err
			}
			if f.w.isClosed() {
				return tipkv.ErrClosed
			}
			st.Streams++
			trimmed, err := f.retainStream(ctx, name, &st)
			if err != nil {
				return fmt.Errorf("stream %q: %w", name, err)
			}
			if trimmed {
				st.Trimmed++
			}
		}
		names = names[:0]
		return nil
	})
	if err != nil && !errors.Is(err, ctx.Err()) && !errors.Is(err, tipkv.ErrClosed) {
		err = fmt.Errorf("retention: %w", err)
	}
	return st, err
}

// retainStream trims one stream to the Feed's bounds when it holds
// something to drop. It reads first, so that a stream within its bounds
// costs no commit: the oldest position, the positions of the newest
// MaxEvents+1 events and the groups' cursors. The trim itself finds its
// cut again under the stream's lock.
func (f *Feed[T]) retainStream(ctx context.Context, name string, st *RetainStats) (trimmed bool, err error) {
	prefix := namePrefix(codec.FamilyFeed, name)
	oldest, err := oldestNumber(f.store, prefix)
	if err != nil || oldest == 0 {
		return false, err
	}
	cut := f.ageCut()
	if n := f.retention.MaxEvents; n > 0 {
		tr := trimmer{store: f.store, prefix: prefix, d: &docState{low: oldest}}
		found, err := tr.stored(span{top: math.MaxInt64, bottom: oldest}, n+1)
		if err != nil {
			return false, err
		}
		if len(found) > n {
			cut = max(cut, found[n])
		}
	}
	if cut < oldest {
		return false, nil
	}
	if !f.pastCursors {
		slowest, err := f.holdBack(ctx, name, cut, st)
		if err != nil {
			return false, err
		}
		if min(cut, slowest) < oldest {
			return false, nil
		}
	}
	err = f.trim(f.db, name, func(tr *trimmer) (int64, error) {
		c := f.ageCut()
		if n := f.retention.MaxEvents; n > 0 {
			byCount, err := tr.cutAfter(n)
			if err != nil {
				return 0, err
			}
			c = max(c, byCount)
		}
		return c, nil
	})
	return err == nil, err
}

// ageCut returns the newest position MaxAge drops, 0 for none.
func (f *Feed[T]) ageCut() int64 {
	if f.retention.MaxAge <= 0 {
		return 0
	}
	return max(f.clock().UnixNano()-f.retention.MaxAge.Nanoseconds()-1, 0)
}

// startTrimmer runs Retain in the background (see background).
func (f *Feed[T]) startTrimmer() error {
	return background(f.db, f.retention, f.retention.Interval, "tipkv: feed retention pass", func(ctx context.Context) ([]slog.Attr, error) {
		st, err := f.Retain(ctx)
		return []slog.Attr{slog.String("event", "feed-retention"), slog.String("streams", f.retention.Streams),
			slog.Int("visited", st.Streams), slog.Int("trimmed", st.Trimmed)}, err
	})
}
