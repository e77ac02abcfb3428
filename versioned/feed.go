package versioned

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
)

// FeedOptions configure a Feed. A nil *FeedOptions is valid and means the
// defaults.
type FeedOptions[T any] struct {
	// Codec encodes and decodes the events. Every handle on one stream
	// must use the same codec. The default is codec.Msgpack[T], naming
	// struct fields as the store was created to (see Options.Codec).
	Codec codec.Value[T]

	// Clock gives the time Append stamps on an event. The default is the
	// DB's clock (tipkv.Options.Clock).
	Clock func() time.Time

	// TrimPastCursors lets Trim and TrimBefore drop events that a group's
	// cursor has not passed yet (see Advance). The default (false) keeps
	// every event after the slowest cursor of the stream.
	TrimPastCursors bool

	// Retention bounds the streams under Retention.Streams by count and
	// by age, trimmed by a background trimmer that this Feed runs until
	// the DB closes (see FeedRetention). The zero value bounds nothing and
	// runs no trimmer. Handles with equal Retentions share one trimmer per
	// DB (the first one's clock and cursor rule), so a handle per request
	// costs no goroutine.
	Retention FeedRetention
}

// Feed appends events of type T to named streams, time series whose
// newest events are one seek away, and reads them newest first.
//
// Every event has a position: an int64 that is unique in its stream, that
// orders the stream, and that reads as a time (Unix nanoseconds, see
// Event.Time). Stream names are 1 to MaxNameSize bytes, any bytes.
//
// A Feed is safe for concurrent use by many goroutines. Any number of
// handles may serve the same streams of one DB: the last position of each
// stream lives in the DB.
type Feed[T any] struct {
	db     *tipkv.DB
	store  engine.Store
	w      *writer
	pos    *positions
	codec  codec.Value[T]
	clock  func() time.Time
	shared bool         // the engine is shared: see shared.go
	fm     docfmt.Rules // how event values read: by the store's format
	// pastCursors: trims ignore the groups' cursors.
	pastCursors bool
	retention   FeedRetention
}

// NewFeed returns a Feed on db.
func NewFeed[T any](db *tipkv.DB, opts *FeedOptions[T]) (*Feed[T], error) {
	w, err := writerOf(db)
	if err != nil {
		return nil, err
	}
	s := w.ln.Store
	pos, err := positionsOf(db)
	if err != nil {
		return nil, err
	}
	f := &Feed[T]{db: db, store: s, w: w, pos: pos, shared: s.Caps().Shared, fm: docfmt.RulesOf(w.ln.Format)}
	if opts != nil {
		if err := opts.Retention.check(); err != nil {
			return nil, err
		}
		f.codec, f.clock, f.pastCursors = opts.Codec, opts.Clock, opts.TrimPastCursors
		f.retention = opts.Retention
	}
	if f.codec == nil {
		f.codec = codec.Msgpack[T]{IgnoreJSONTags: w.ln.LegacyNames}
	}
	if f.clock == nil {
		f.clock = w.ln.Clock
	}
	if f.retention.active() && f.retention.Interval >= 0 {
		if err := f.startTrimmer(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Event is one event of a stream, as a read returns it. Value is decoded
// into memory of its own: the caller may keep it.
type Event[T any] struct {
	Stream   string
	Position int64
	Value    T

	meta []byte // encoded metadata (docfmt.AppendMeta), nil for none
}

// Metadata returns the metadata the event was appended with
// (tipkv.WithMetadata, Batch.SetMetadata), decoded now: the zero
// Metadata for none. A read decodes only the event; the metadata waits
// for this call.
func (e Event[T]) Metadata() (tipkv.Metadata, error) {
	if e.meta == nil {
		return tipkv.Metadata{}, nil
	}
	m, err := docfmt.ParseMeta(e.meta)
	if err != nil {
		return tipkv.Metadata{}, fmt.Errorf("%w: stream %q, position %d: %w", tipkv.ErrCorrupt, e.Stream, e.Position, err)
	}
	return tipkv.Metadata(m), nil
}

// HasMetadata reports whether the event was appended with metadata,
// without decoding it.
func (e Event[T]) HasMetadata() bool { return e.meta != nil }

// Time returns the position as a time.
func (e Event[T]) Time() time.Time { return time.Unix(0, e.Position) }

// Cursor returns the position just after e in a newest-first read of its
// stream, for Query.After.
func (e Event[T]) Cursor() tipkv.Cursor {
	if e.Stream == "" {
		return ""
	}
	return numberCursor(kindFeed, namePrefix(codec.FamilyFeed, e.Stream), e.Position)
}

// Newest yields the events of stream newest first: the positions in
// [q.From, q.To] (zero: open), below the position of q.After when set, at
// most q.Limit of them (zero: all). It is one seek and a forward scan
// bounded on both sides. An error is yielded once, as the last pair.
//
// For the newest n events: Newest(stream, tipkv.Query{Limit: n}). To read
// page by page, pass the Cursor of the last Event of a page as q.After for
// the next.
func (f *Feed[T]) Newest(stream string, q tipkv.Query) iter.Seq2[Event[T], error] {
	return f.read(f.store, stream, q, 0, math.MaxInt64)
}

// Between yields the events of stream whose time is in [from, to), newest
// first, within q's bounds too, as Newest does. from after to is
// ErrInvalid. Unlike the writes, it takes any times (time.Time{} for an
// open start, say): the answer over any interval is exact.
func (f *Feed[T]) Between(stream string, from, to time.Time, q tipkv.Query) iter.Seq2[Event[T], error] {
	return f.between(f.store, stream, from, to, q)
}

func (f *Feed[T]) between(r engine.Reader, stream string, from, to time.Time, q tipkv.Query) iter.Seq2[Event[T], error] {
	if from.After(to) {
		return func(yield func(Event[T], error) bool) {
			yield(Event[T]{}, fmt.Errorf("%w: stream %q: from %v is after to %v", tipkv.ErrInvalid, stream, from, to))
		}
	}
	return f.read(r, stream, q, max(unixNanos(from), 1), unixNanos(to)-1)
}

// read is Newest within [lo, hi] as well as q's bounds.
func (f *Feed[T]) read(r engine.Reader, stream string, q tipkv.Query, lo, hi int64) iter.Seq2[Event[T], error] {
	return func(yield func(Event[T], error) bool) {
		prefix, sp, ok, err := f.span(stream, q, lo, hi)
		if err != nil {
			yield(Event[T]{}, err)
			return
		}
		if !ok {
			return
		}
		stopped, err := f.newest(r, stream, prefix, sp, q.Limit, yield)
		if err != nil && !stopped {
			yield(Event[T]{}, fmt.Errorf("stream %q: %w", stream, err))
		}
	}
}

func (f *Feed[T]) newest(r engine.Reader, stream string, prefix []byte, sp span, limit int, yield func(Event[T], error) bool) (stopped bool, err error) {
	var sc newestScan
	if err := sc.open(r, prefix, sp, limit); err != nil {
		return false, err
	}
	defer func() {
		if cerr := sc.close(); err == nil {
			err = cerr
		}
	}()
	scratch := new(T) // see Collection.doc
	for sc.next() {
		raw, err := sc.value()
		if err != nil {
			return false, err
		}
		var zero T
		*scratch = zero
		ev, meta := f.fm.ParseEvent(raw)
		err = f.codec.Decode(ev, scratch)
		if err != nil {
			if !errors.Is(err, tipkv.ErrCorrupt) {
				err = fmt.Errorf("%w: %w", tipkv.ErrCorrupt, err)
			}
			return false, fmt.Errorf("position %d: %w", sc.n, err)
		}
		if meta != nil {
			meta = bytes.Clone(meta) // raw is the iterator's
		}
		if !yield(Event[T]{Stream: stream, Position: sc.n, Value: *scratch, meta: meta}, nil) {
			return true, nil
		}
	}
	return false, sc.err
}

func (f *Feed[T]) span(stream string, q tipkv.Query, lo, hi int64) (prefix []byte, sp span, ok bool, err error) {
	if err := checkName("stream", stream); err != nil {
		return nil, span{}, false, err
	}
	if err := q.Validate(); err != nil {
		return nil, span{}, false, fmt.Errorf("stream %q: %w", stream, err)
	}
	if q.Prefix != "" {
		return nil, span{}, false, fmt.Errorf("%w: stream %q: Query.Prefix is for LatestAll", tipkv.ErrInvalid, stream)
	}
	prefix = namePrefix(codec.FamilyFeed, stream)
	var after int64
	if q.After != "" {
		if after, err = parseNumberCursor(q.After, kindFeed, prefix); err != nil {
			return nil, span{}, false, fmt.Errorf("stream %q: %w", stream, err)
		}
	}
	sp, ok = spanOf(q, after)
	sp.top, sp.bottom = min(sp.top, hi), max(sp.bottom, lo)
	return prefix, sp, ok && sp.top >= sp.bottom, nil
}

// Trim drops all but the keepNewest newest events of stream (keepNewest 0
// drops them all), and never an event after the cursor of one of the
// stream's groups (see Advance) unless FeedOptions.TrimPastCursors is set:
// it reads the stream's cursors, one short scan. Finding where to cut scans the positions of the
// keepNewest newest events. Inside an Update the Update's own Appends
// count, and are dropped like the others; events of other Updates not yet
// committed are not counted. Trims of one stream wait for each other (see
// Collection.Put), Appends never wait for a trim.
//
// On a shared engine the events at or below the cut go with one range
// delete at commit; events other processes append while Trim runs are
// kept, so it may keep more than keepNewest, never fewer.
//
// Positions do not go back after a trim: a trim that drops the stream's
// newest event (keepNewest 0, say) stores its cut, that event's position,
// as the stream's trim mark (one key, 04 | stream | desc(0)), and Append
// places later events above it, after a restart and in other processes
// too (see Append). A trim that keeps the newest event writes nothing more.
func (f *Feed[T]) Trim(w tipkv.Writer, stream string, keepNewest int) error {
	if err := checkName("stream", stream); err != nil {
		return err
	}
	if keepNewest < 0 {
		return fmt.Errorf("%w: stream %q: Trim to keep %d events", tipkv.ErrInvalid, stream, keepNewest)
	}
	return f.trim(w, stream, func(tr *trimmer) (int64, error) { return tr.cutAfter(keepNewest) })
}

// TrimBefore drops the events of stream older than t: positions in
// [0, t), the Update's own Appends included when w is a Batch, but none
// after a group's cursor, as for Trim. t must be
// in [MinTime, MaxTime]; any other time is ErrInvalid and drops nothing.
// On a shared engine, when the stream holds events before t, they go with
// one range delete at commit, which also takes those other processes
// append before t meanwhile.
//
// When it drops the stream's newest event, t-1 becomes the stream's trim
// mark (see Trim), since every event appended before t meanwhile may go
// with it: Append then places events at t or after, even while the clock
// reads a time before t.
func (f *Feed[T]) TrimBefore(w tipkv.Writer, stream string, t time.Time) error {
	if err := checkName("stream", stream); err != nil {
		return err
	}
	if err := checkTime("TrimBefore time", t); err != nil {
		return fmt.Errorf("stream %q: %w", stream, err)
	}
	cut := t.UnixNano() - 1
	return f.trim(w, stream, func(*trimmer) (int64, error) { return cut, nil })
}

// trim drops the events of stream at or below the position cut returns.
func (f *Feed[T]) trim(w tipkv.Writer, stream string, cut func(*trimmer) (int64, error)) error {
	prefix := namePrefix(codec.FamilyFeed, stream)
	return link.Write(w, func(tx *link.Tx) error {
		tr, err := f.trimmer(tx, prefix)
		if err != nil {
			return fmt.Errorf("stream %q: %w", stream, err)
		}
		c, err := cut(tr)
		if err == nil && !f.pastCursors && c > 0 {
			// Never past the slowest group's cursor.
			var slowest int64
			if slowest, err = slowestCursor(f.store, stream); err == nil {
				c = min(c, slowest)
			}
		}
		var top int64
		if err == nil && c > 0 {
			// Read before the drop, which marks the Tx's own Appends
			// dropped.
			top, err = tr.topKnown()
		}
		if err == nil {
			if f.shared {
				err = tr.dropShared(c)
			} else {
				err = tr.drop(c)
			}
		}
		if err == nil && c > 0 {
			err = tr.mark(top, c, f.shared)
		}
		if err != nil {
			return fmt.Errorf("stream %q: %w", stream, err)
		}
		return nil
	})
}

// trimmer is one trim of a stream in a Tx that holds the stream.
type trimmer struct {
	tx     *link.Tx
	store  engine.Store
	prefix []byte
	st     *stream
	d      *docState // the Tx's view: low and cut
	own    *feedTx   // the Tx's Appends
	// newest is the stream's newest stored event (0: none), known when
	// newestRead: cutAfter's scan starts there.
	newest     int64
	newestRead bool
}

func (f *Feed[T]) trimmer(tx *link.Tx, prefix []byte) (*trimmer, error) {
	t, err := f.w.txOf(tx)
	if err != nil {
		return nil, err
	}
	e, err := t.lock(prefix)
	if err != nil {
		return nil, err
	}
	// Pinned until the trim watches it (a shared engine's trim uses st
	// only to find the Tx's own Appends, which keep it in memory).
	st := f.pos.pin(prefix)
	defer f.pos.unpin(st)
	switch {
	case f.shared:
		// Another process's events may lie anywhere: no low bound is
		// kept (the scans start from position 1), and the stream's
		// in-memory trim state is not used.
		if e.tx.low == 0 {
			e.tx = docState{low: 1}
		}
	case e.stream == nil:
		e.stream = st
		e.tx = docState{}
		e.tx.low, e.tx.trimmed = st.trimBegin()
	}
	return &trimmer{tx: tx, store: f.store, prefix: prefix, st: st, d: &e.tx, own: feedTxOf(tx, f.w, f.shared)}, nil
}

// bottom returns the lowest position the stream may still hold in the
// store that the Tx has not dropped, reading the oldest one when the low
// bound is unknown.
func (tr *trimmer) bottom() (int64, error) {
	if tr.d.low == 0 {
		oldest, err := oldestNumber(tr.store, tr.prefix)
		if err != nil {
			return 0, err
		}
		tr.d.low = max(oldest, 1)
	}
	return max(tr.d.low, tr.d.cut+1), nil
}

// cutAfter returns the position of the event after the keep newest ones,
// the Tx's own Appends counted, 0 if there is none.
func (tr *trimmer) cutAfter(keep int) (cut int64, err error) {
	bottom, err := tr.bottom()
	if err != nil {
		return 0, err
	}
	own := tr.own.own(tr.st)
	var sc newestScan
	if err := sc.open(tr.store, tr.prefix, span{top: math.MaxInt64, bottom: bottom}, keep+1); err != nil {
		return 0, err
	}
	defer func() {
		if cerr := sc.close(); err == nil {
			err = cerr
		}
	}()
	stored := sc.next()
	if sc.err == nil {
		// The scan starts at the top: its first event is the newest.
		tr.newest, tr.newestRead = 0, true
		if stored {
			tr.newest = sc.n
		}
	}
	for n := 0; ; n++ {
		var p int64
		switch {
		case stored && (len(own) == 0 || sc.n > own[0]):
			p = sc.n
			stored = sc.next()
		case len(own) > 0:
			p, own = own[0], own[1:]
		default:
			return 0, sc.err
		}
		if n == keep {
			return p, nil
		}
	}
}

// drop deletes the events at or below cut that the Tx has not dropped
// yet. The stored ones above every earlier trim, in [floor, cut], go with
// point deletes when there are fewer than knobs.Versioned.DropRangeMin, with one range
// delete otherwise: it starts above the earlier trims, so it never
// overlaps their deletes. The stored ones below (appended into the past
// after a trim) and the Tx's own Appends go with point deletes, unless the
// range covers them.
func (tr *trimmer) drop(cut int64) (err error) {
	if cut < 1 {
		return nil
	}
	bottom, err := tr.bottom()
	if err != nil {
		return err
	}
	floor := max(bottom, tr.d.trimmed+1, tr.d.cut+1)
	covered := int64(math.MaxInt64) // own Appends at or above it go with a range
	if floor <= cut {
		found, err := tr.stored(span{top: cut, bottom: floor}, knobs.Versioned.DropRangeMin)
		if err != nil {
			return err
		}
		if len(found) < knobs.Versioned.DropRangeMin {
			err = tr.deletePoints(found)
		} else {
			err, covered = deleteRange(tr.tx, numberKey(tr.prefix, cut), numberKey(tr.prefix, floor-1)), floor
		}
		if err != nil {
			return err
		}
	}
	if bottom < floor && bottom <= cut {
		found, err := tr.stored(span{top: min(floor-1, cut), bottom: bottom}, 0)
		if err == nil {
			err = tr.deletePoints(found)
		}
		if err != nil {
			return err
		}
	}
	var own []int64
	for _, p := range tr.own.own(tr.st) {
		if p <= cut && p < covered {
			own = append(own, p)
		}
	}
	if err := tr.deletePoints(own); err != nil {
		return err
	}
	tr.own.drop(tr.st, cut)
	tr.d.cut = max(tr.d.cut, cut)
	tr.d.low = max(tr.d.low, tr.d.cut+1)
	return nil
}

// dropShared is drop on a shared engine: the events at or below cut go
// with one range delete, [1, cut] (above what the Tx's earlier trims
// covered), when the store holds any there; the Tx's own Appends at or
// below cut that no range of this trim covers go with point deletes. It
// needs no condition: a range delete drops at commit whatever the range
// then holds, events another process appended meanwhile included, and a
// Trim's cut stays below the events it keeps, which only newer events can
// outnumber.
func (tr *trimmer) dropShared(cut int64) error {
	if cut < 1 {
		return nil
	}
	covered := tr.d.trimmed // the Tx's ranges dropped [1, covered]
	ranged := false
	if cut > covered {
		found, err := tr.stored(span{top: cut, bottom: covered + 1}, 1)
		if err != nil {
			return err
		}
		if len(found) > 0 {
			if err := deleteRange(tr.tx, numberKey(tr.prefix, cut), numberKey(tr.prefix, covered)); err != nil {
				return err
			}
			ranged, tr.d.trimmed = true, cut
		}
	}
	var own []int64
	for _, p := range tr.own.own(tr.st) {
		// The Tx's Appends not dropped yet were all written before this
		// range, which covers those in (covered, cut].
		if p <= cut && (!ranged || p <= covered) {
			own = append(own, p)
		}
	}
	if err := tr.deletePoints(own); err != nil {
		return err
	}
	tr.own.drop(tr.st, cut)
	tr.d.cut = max(tr.d.cut, cut)
	return nil
}

// stored returns the positions of the stored events in sp, newest first,
// at most limit of them (0: all).
func (tr *trimmer) stored(sp span, limit int) (found []int64, err error) {
	var sc newestScan
	if err := sc.open(tr.store, tr.prefix, sp, limit); err != nil {
		return nil, err
	}
	defer func() {
		if cerr := sc.close(); err == nil {
			err = cerr
		}
	}()
	for sc.next() {
		found = append(found, sc.n)
	}
	return found, sc.err
}

func (tr *trimmer) deletePoints(ps []int64) error {
	for _, p := range ps {
		if err := deletePoint(tr.tx, numberKey(tr.prefix, p)); err != nil {
			return err
		}
	}
	return nil
}
