package versioned

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// SincePage is how many events Since and Follow read from the store at a
// time (and hold in memory).
const SincePage = 1000

// Since yields the events of stream after position after, oldest first:
// the positions in (after, q.To] (q.To zero: open) and at or above q.From,
// at most q.Limit of them (zero: every one, read SincePage at a time). A
// follower that reads in pages passes the position of the last event one
// page yields as after for the next.
// q.After and q.Prefix are ErrInvalid. An error is yielded once, as the
// last pair.
//
// Since never skips an event that commits later at a lower position: it
// reads only positions that can no longer gain events. On an exclusive
// engine (Pebble) that is below the least position an Append of this
// process has handed out whose Update has not committed or aborted, and
// an event is read only once its commit is as durable as its Update asked
// (synced by default: a crash cannot erase it; with tipkv.Options.NoSync
// it can, as it can erase the event for Newest). On a shared engine Append
// makes commit order equal position order across processes (see Append),
// and every event stored is durable, so Since reads up to the newest event
// stored when it starts. In contrast Newest and Between read every event
// committed (visible) at the moment of the read, which on Pebble includes
// events whose synced commit has not finished, and may later gain events
// of slower Updates at lower positions.
//
// AppendAt into the past writes at a position a follower may already
// have passed: such an event is delivered to the followers that have not
// reached it only.
//
// Oldest-first reading over newest-first keys: Since reads bounded windows
// of positions, each one forward scan with both bounds set, and narrows a
// window that holds more events than it needs (from the density it saw).
// A page that catches up on a long stream thus costs a few scans, a
// follower near the head one.
func (f *Feed[T]) Since(stream string, after int64, q tipkv.Query) iter.Seq2[Event[T], error] {
	return func(yield func(Event[T], error) bool) {
		prefix, lo, hi, limit, err := f.sinceSpan(stream, after, q)
		if err != nil {
			yield(Event[T]{}, err)
			return
		}
		var bound int64
		if f.shared {
			bound, _, err = f.followBound(nil, prefix, false)
		} else {
			st := f.pos.pin(prefix)
			bound, _, err = f.followBound(st, prefix, false)
			f.pos.unpin(st)
		}
		if err != nil {
			yield(Event[T]{}, fmt.Errorf("stream %q: %w", stream, err))
			return
		}
		var width int64
		hi = min(hi, bound)
		for {
			page := min(limit, SincePage)
			evs, err := f.oldest(stream, prefix, lo, hi, page, &width)
			for _, e := range evs {
				if !yield(e, nil) {
					return
				}
			}
			if err != nil {
				yield(Event[T]{}, fmt.Errorf("stream %q: %w", stream, err))
				return
			}
			limit -= len(evs)
			if len(evs) < page || limit == 0 || evs[len(evs)-1].Position >= hi {
				return
			}
			lo = evs[len(evs)-1].Position + 1
		}
	}
}

func (f *Feed[T]) sinceSpan(stream string, after int64, q tipkv.Query) (prefix []byte, lo, hi int64, limit int, err error) {
	if err := checkName("stream", stream); err != nil {
		return nil, 0, 0, 0, err
	}
	if err := q.Validate(); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("stream %q: %w", stream, err)
	}
	if q.After != "" || q.Prefix != "" {
		return nil, 0, 0, 0, fmt.Errorf("%w: stream %q: Since takes a position, not Query.After or Query.Prefix", tipkv.ErrInvalid, stream)
	}
	if after < 0 {
		return nil, 0, 0, 0, fmt.Errorf("%w: stream %q: Since after position %d", tipkv.ErrInvalid, stream, after)
	}
	lo, hi, limit = max(after, q.From-1, 0)+1, int64(math.MaxInt64), q.Limit
	if after == math.MaxInt64 {
		lo, hi = math.MaxInt64, 0 // nothing after the last position
	}
	if q.To > 0 {
		hi = q.To
	}
	if limit == 0 {
		limit = math.MaxInt
	}
	return namePrefix(codec.FamilyFeed, stream), lo, hi, limit, nil
}

// followBound returns the greatest position a follower may read now (see
// Since) and, on an exclusive engine, a channel closed when it may have
// moved. st is the stream's state, pinned, on an exclusive engine.
func (f *Feed[T]) followBound(st *stream, prefix []byte, wait bool) (int64, <-chan struct{}, error) {
	if st != nil {
		return st.followBound(f.store, prefix, wait)
	}
	// Commit order is position order: every event at or below the newest
	// one stored has committed.
	n, err := newestNumber(f.store, prefix)
	return n, nil, err
}

// Follow yields the events of stream after position after, oldest first,
// as Since pages them, and when it has caught up blocks until more can be
// read: every event is yielded once, in position order, and none is
// skipped (AppendAt into the past aside, see Since). A consumer that
// stores the position of the last event it handled resumes from it after
// a restart with Follow(ctx, stream, stored); a consumer that writes its
// results and its cursor in one Update (see Feed.Advance) handles each
// event exactly once.
//
// On an exclusive engine a wait ends when an Append of the stream
// commits; nothing polls. On a shared engine it ends when the engine
// reports a change to the stream's keys (storage Caps.Watch), or else at
// the engine's poll interval, or when this process appends to it.
//
// Follow ends when ctx ends, yielding ctx.Err(), or when the DB closes,
// yielding an error matching ErrClosed, or when the caller stops. A read
// error is yielded too, and ends it.
func (f *Feed[T]) Follow(ctx context.Context, stream string, after int64) iter.Seq2[Event[T], error] {
	return func(yield func(Event[T], error) bool) {
		prefix, lo, _, _, err := f.sinceSpan(stream, after, tipkv.Query{})
		if err != nil {
			yield(Event[T]{}, err)
			return
		}
		st := f.pos.pin(prefix)
		defer f.pos.unpin(st)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var watch <-chan struct{}
		var tick <-chan time.Time
		watcher, _ := f.store.(engine.Watcher)
		caps := f.store.Caps()
		if f.shared && (!caps.Watch || watcher == nil) {
			poll := caps.PollInterval
			if poll <= 0 {
				poll = time.Second
			}
			t := time.NewTicker(poll)
			defer t.Stop()
			tick = t.C
		}
		fail := func(err error) {
			switch {
			case ctx.Err() != nil:
				yield(Event[T]{}, ctx.Err())
			case f.w.isClosed() || errors.Is(err, tipkv.ErrClosed):
				yield(Event[T]{}, fmt.Errorf("stream %q: follow: %w", stream, tipkv.ErrClosed))
			default:
				yield(Event[T]{}, fmt.Errorf("stream %q: %w", stream, err))
			}
		}
		var width int64
		for {
			if err := ctx.Err(); err != nil {
				fail(err)
				return
			}
			if f.w.isClosed() {
				fail(tipkv.ErrClosed)
				return
			}
			if f.shared && watcher != nil && caps.Watch && watch == nil {
				// Watch before reading: no change after the read is missed.
				if watch, err = watcher.Watch(wctx, prefix, numberKey(prefix, 0)); err != nil {
					fail(err)
					return
				}
			}
			var changed <-chan struct{}
			var bound int64
			if f.shared {
				changed = st.changedCh()
				bound, _, err = f.followBound(nil, prefix, false)
			} else {
				bound, changed, err = f.followBound(st, prefix, true)
			}
			if err != nil {
				fail(err)
				return
			}
			evs, err := f.oldest(stream, prefix, lo, bound, SincePage, &width)
			last := false
			for _, e := range evs {
				if !yield(e, nil) {
					return
				}
				if last = e.Position == math.MaxInt64; !last {
					lo = e.Position + 1
				}
			}
			if err != nil {
				fail(err)
				return
			}
			if last {
				break // nothing can follow the last position
			}
			if len(evs) > 0 {
				continue
			}
			select {
			case <-ctx.Done():
			case <-f.w.closing:
			case <-changed:
			case <-tick:
			case _, ok := <-watch:
				if !ok {
					watch = nil // broken or closed: watch again, or fail
				}
			}
		}
		// After the last position: wait for the end.
		select {
		case <-ctx.Done():
			yield(Event[T]{}, ctx.Err())
		case <-f.w.closing:
			fail(tipkv.ErrClosed)
		}
	}
}

// oldest returns the events of stream in [lo, hi], oldest first, at most
// limit of them. width is the width of the window of positions to read
// first (0: the whole span); it is left at a width that suited this read,
// for the next.
//
// The keys are newest first, and the storage contract iterates forward
// only, so oldest-first reading goes window by window: a window
// [lo, lo+width-1] is one forward scan with both bounds, reading at most
// need+1 events. When the window holds more than need events, the oldest
// need of them lie below the newest need+1, so the window narrows to the
// width that held those and is read again; when it holds fewer, they are
// taken and the next window, twice as wide, starts above it. On an
// exclusive engine an empty window jumps to the oldest event above it
// (one reverse seek, cheap on Pebble); on a shared engine, where a
// reverse seek may read its whole range, windows only double.
func (f *Feed[T]) oldest(stream string, prefix []byte, lo, hi int64, limit int, width *int64) ([]Event[T], error) {
	var out []Event[T]
	var got []rawEvent
	for len(out) < limit && lo <= hi {
		need := limit - len(out)
		top := hi
		if w := *width; w > 0 && w-1 < hi-lo {
			top = lo + w - 1
		}
		var err error
		if got, err = scanRaw(f.store, prefix, span{top: top, bottom: lo}, need+1, got[:0]); err != nil {
			return out, err
		}
		if len(got) > need {
			// [got[need], top] held need+1 events: a window that wide
			// holds about need of them, if they are spread evenly; and
			// at most half as wide as this one, so that a few narrowings
			// reach any cluster.
			*width = max(min(top-got[need].n, (top-lo)/2+1), 1)
			continue
		}
		for i := len(got) - 1; i >= 0; i-- {
			e, err := f.decodeRaw(stream, got[i])
			if err != nil {
				return out, err
			}
			out = append(out, e)
		}
		if top == hi {
			break
		}
		lo = top + 1
		if 2*len(got) < need && *width < math.MaxInt64/2 {
			*width *= 2
		}
		if len(got) == 0 && !f.shared {
			n, err := oldestIn(f.store, prefix, span{top: hi, bottom: lo})
			if err != nil || n == 0 {
				return out, err
			}
			lo = n
		}
	}
	return out, nil
}

// rawEvent is an event as stored: its position and a copy of its value.
type rawEvent struct {
	n   int64
	val []byte
}

func (f *Feed[T]) decodeRaw(stream string, r rawEvent) (Event[T], error) {
	var v T
	ev, meta := f.fm.ParseEvent(r.val) // r.val is a copy: meta may alias it
	if err := f.codec.Decode(ev, &v); err != nil {
		if !errors.Is(err, tipkv.ErrCorrupt) {
			err = fmt.Errorf("%w: %w", tipkv.ErrCorrupt, err)
		}
		return Event[T]{}, fmt.Errorf("position %d: %w", r.n, err)
	}
	return Event[T]{Stream: stream, Position: r.n, Value: v, meta: meta}, nil
}

// scanRaw appends to dst the stored events of prefix in sp, newest first,
// at most limit of them.
func scanRaw(r engine.Reader, prefix []byte, sp span, limit int, dst []rawEvent) (out []rawEvent, err error) {
	var sc newestScan
	if err := sc.open(r, prefix, sp, limit); err != nil {
		return dst, err
	}
	defer func() {
		if cerr := sc.close(); err == nil {
			err = cerr
		}
	}()
	for sc.next() {
		v, err := sc.value()
		if err != nil {
			return dst, err
		}
		dst = append(dst, rawEvent{n: sc.n, val: slices.Clone(v)})
	}
	return dst, sc.err
}

// oldestIn returns the oldest position of prefix in sp, 0 if there is
// none: one reverse seek over the tightest range known.
func oldestIn(r engine.Reader, prefix []byte, sp span) (int64, error) {
	it, err := newIter(r, numberKey(prefix, sp.top), numberKey(prefix, sp.bottom-1), 1)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	return numberOf(it.Key(), len(prefix))
}
