package versioned

import (
	"bytes"
	"fmt"
	"iter"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
)

// Reads by commit time. Within a document, commit times increase with
// versions (see Put), and versions are dense from the oldest kept to the
// latest, so the version latest at a time t is found by a binary search
// over version numbers, each probe one seek of one iterator (one view of
// the store). A document's history, by time, looks so:
//
//	[oldest, first timed)   versions of formats before 4: no time
//	[first timed, latest]   times increasing, 1 ns apart at least
//
// The latest version answers the usual read, "now or a moment ago", with
// one seek; an older time costs about 2 + log2(latest - oldest) seeks.

// timeline is one document's versions as a read by time sees them,
// through one iterator. latest and oldest are read when first needed.
type timeline struct {
	fm docfmt.Rules
	// indexed, when set, answers a time before the latest version's by
	// the collection's time index (see timeindex.go); ok false: search.
	indexed func(t int64) (v int64, raw []byte, ok bool, err error)
	it      engine.Iter
	prefix  []byte
	key     []byte // scratch: prefix | desc(v)

	latest, ltime int64 // latest: 0 for none
	lraw          []byte
	oldest, otime int64 // oldest: 0 until read
	oraw          []byte
}

// openTimeline opens the timeline of the document under prefix on r and
// reads its latest version (one seek).
func openTimeline(r engine.Reader, fm docfmt.Rules, prefix []byte) (*timeline, error) {
	it, err := newIter(r, prefix, numberKey(prefix, 0), 1)
	if err != nil {
		return nil, err
	}
	tl := &timeline{fm: fm, it: it, prefix: prefix}
	if !it.SeekPrefixGE(prefix) {
		if err := it.Error(); err != nil {
			_ = it.Close()
			return nil, err
		}
		return tl, nil
	}
	if tl.latest, tl.lraw, tl.ltime, err = tl.here(); err != nil {
		_ = it.Close()
		return nil, err
	}
	return tl, nil
}

func (tl *timeline) close() error { return tl.it.Close() }

// openTimeline is openTimeline with the collection's time index, when it
// is on, for the searches.
func (c *Collection[T]) openTimeline(r engine.Reader, prefix []byte) (*timeline, error) {
	tl, err := openTimeline(r, c.fm, prefix)
	if err == nil && TimeIndexState(c.ti.state.Load()) == TimeIndexOn {
		tl.indexed = func(t int64) (int64, []byte, bool, error) { return c.indexedAt(r, prefix, t) }
	}
	return tl, err
}

// here returns the version under the iterator, a copy of its value and its
// commit time (0: none).
func (tl *timeline) here() (v int64, raw []byte, t int64, err error) {
	if v, err = numberOf(tl.it.Key(), len(tl.prefix)); err != nil {
		return 0, nil, 0, err
	}
	val, err := tl.it.Value()
	if err != nil {
		return 0, nil, 0, err
	}
	raw = bytes.Clone(val)
	return v, raw, tl.fm.Parse(raw).Time, nil
}

// seekVersion moves to version v (dense: it is there unless a drop raced
// the read on an engine whose iterators are not one view).
func (tl *timeline) seekVersion(v int64) (got int64, raw []byte, t int64, err error) {
	tl.key = numberKey(tl.prefix, v)
	if !tl.it.SeekGE(tl.key) {
		if err := tl.it.Error(); err != nil {
			return 0, nil, 0, err
		}
		return 0, nil, 0, fmt.Errorf("%w: version %d is gone while the read ran", tipkv.ErrConflict, v)
	}
	return tl.here()
}

// readOldest reads the oldest version (one seek), once.
func (tl *timeline) readOldest() error {
	if tl.oldest != 0 || tl.latest == 0 {
		return nil
	}
	if !tl.it.Last() {
		if err := tl.it.Error(); err != nil {
			return err
		}
		return fmt.Errorf("%w: no oldest version under the latest %d", tipkv.ErrCorrupt, tl.latest)
	}
	var err error
	tl.oldest, tl.oraw, tl.otime, err = tl.here()
	return err
}

// timeAnswer is what at found.
type timeAnswer byte

const (
	answered timeAnswer = iota // v is the version
	none                       // the document has no version at t (younger)
	pruned                     // versions before the oldest kept were dropped
	untimed                    // the answer lies among versions without time
)

// at returns the greatest version whose commit time is <= t and its value,
// or why there is none.
func (tl *timeline) at(t int64) (v int64, raw []byte, ans timeAnswer, err error) {
	switch {
	case tl.latest == 0:
		return 0, nil, none, nil
	case tl.ltime == 0:
		return 0, nil, untimed, nil // no version has a time
	case tl.ltime <= t:
		return tl.latest, tl.lraw, answered, nil
	}
	if tl.indexed != nil {
		v, raw, ok, err := tl.indexed(t)
		if err != nil || ok {
			return v, raw, answered, err
		}
	}
	if err := tl.readOldest(); err != nil {
		return 0, nil, 0, err
	}
	if tl.otime > t {
		if tl.oldest > 1 {
			return 0, nil, pruned, nil
		}
		return 0, nil, none, nil
	}
	// Search (lo, hi): time(lo) <= t or lo has no time; time(hi) > t.
	lo, loRaw, loTime, hi := tl.oldest, tl.oraw, tl.otime, tl.latest
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		got, raw, mt, err := tl.seekVersion(mid)
		if err != nil {
			return 0, nil, 0, err
		}
		if got != mid {
			return 0, nil, 0, fmt.Errorf("%w: version %d is gone while the read ran", tipkv.ErrConflict, mid)
		}
		if mt != 0 && mt > t {
			hi = mid
		} else {
			lo, loRaw, loTime = mid, raw, mt
		}
	}
	if loTime == 0 {
		return 0, nil, untimed, nil
	}
	return lo, loRaw, answered, nil
}

// AsOfTime returns the version of the document id that was latest at t:
// the greatest version whose commit time (Doc.Time) is at or before t.
// Like AsOf, it answers ErrNotFound when there is none (the document is
// younger than t) or that version is a delete marker (the document was
// deleted at t) or has expired (Options.TTL); and never a wrong answer
// where versions are missing:
//
//   - t is before the oldest version kept, and older ones were dropped
//     (Prune, PruneBefore, KeepVersions): a *tipkv.PrunedError, matching
//     tipkv.ErrPruned, that carries the oldest time still answerable;
//   - no version is at or before t, and t is before the collection's
//     purge horizon: a document dropped whole (Purge, or the purge of
//     expired documents) may have had one there, so a *tipkv.PrunedError
//     with the horizon as Oldest. The horizon is the time from which the
//     last document dropped whole was gone, one per collection: a
//     document never dropped whole is answered so too;
//   - the answer lies among versions written before store format 4, which
//     have no time: tipkv.ErrUntimed.
//
// It is one seek when t is at or after the latest version's time, else
// about 2 + log2(versions kept) seeks of one iterator, one view of the
// store; one seek more when no version answers.
func (c *Collection[T]) AsOfTime(id string, t time.Time) (Doc[T], error) {
	return c.asOfTime(c.store, id, t)
}

func (c *Collection[T]) asOfTime(r engine.Reader, id string, t time.Time) (d Doc[T], err error) {
	if err := checkID(c.name, id); err != nil {
		return Doc[T]{}, err
	}
	prefix := c.docPrefix(nil, id)
	if r == c.store && c.missing(prefix) {
		if err := c.noneAt(r, id, t); err != nil {
			return Doc[T]{}, err
		}
		return Doc[T]{}, &notFoundError{coll: c.name, id: id, kind: missingDoc}
	}
	// With the time index: one seek of the index and one of the
	// versions. Without (or no answer from it): the search.
	if v, raw, ok, err := c.indexedAt(r, prefix, unixNano(t)); err != nil || ok {
		if err != nil {
			return Doc[T]{}, fmt.Errorf("%s: %w", c.where(id), err)
		}
		if c.fm.IsDeleteMarker(raw) {
			return Doc[T]{}, &notFoundError{coll: c.name, id: id, deletedAt: v, kind: deletedDoc}
		}
		return c.docOne(id, v, raw)
	}
	tl, err := c.openTimeline(r, prefix)
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s: %w", c.where(id), err)
	}
	defer func() {
		if cerr := tl.close(); err == nil && cerr != nil {
			d, err = Doc[T]{}, fmt.Errorf("%s: %w", c.where(id), cerr)
		}
	}()
	v, raw, ans, err := tl.at(unixNano(t))
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s: %w", c.where(id), err)
	}
	if ans == none {
		if err := c.noneAt(r, id, t); err != nil {
			return Doc[T]{}, err
		}
	}
	if err := c.timeAnswerErr(id, t, tl, ans); err != nil {
		return Doc[T]{}, err
	}
	if c.fm.IsDeleteMarker(raw) {
		return Doc[T]{}, &notFoundError{coll: c.name, id: id, deletedAt: v, kind: deletedDoc}
	}
	return c.docOne(id, v, raw)
}

// noneAt is the error of a read of the document id at t that found no
// version there: ErrPruned before the collection's purge horizon, nil
// otherwise (the read's own ErrNotFound).
func (c *Collection[T]) noneAt(r engine.Reader, id string, t time.Time) error {
	h, err := c.horizon(r)
	if err != nil {
		return err
	}
	return c.prunedBefore(c.where(id), t, unixNano(t), h)
}

// timeAnswerErr turns a timeline's answer other than answered into the
// read's error.
func (c *Collection[T]) timeAnswerErr(id string, t time.Time, tl *timeline, ans timeAnswer) error {
	switch ans {
	case none:
		return fmt.Errorf("%w: %s: no version at %s", tipkv.ErrNotFound, c.where(id), t.UTC().Format(time.RFC3339Nano))
	case pruned:
		return &tipkv.PrunedError{Where: c.where(id), Asked: t, Oldest: timeOf(tl.otime)}
	case untimed:
		return fmt.Errorf("%w: %s: the version at %s was written before commit times (store format 3 or older)", tipkv.ErrUntimed, c.where(id), t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// HistoryBetween yields the versions of the document id whose commit
// times are in [from, to], newest first, as History does (delete markers
// included, expired versions skipped, q.Limit and q.After as there; q.From
// and q.To must be zero). A zero from reads from the oldest version kept,
// a zero to up to the latest. It is never silently short: when from is
// before the oldest version kept and older ones were dropped, or no
// version is before from and from is before the collection's purge
// horizon (see AsOfTime), it yields a *tipkv.PrunedError (matching
// tipkv.ErrPruned) with the oldest time still answerable, and when a bound falls among versions without time (written
// before store format 4) tipkv.ErrUntimed, as its only pair.
//
// It finds the versions at both ends as AsOfTime does, then scans them as
// History does.
func (c *Collection[T]) HistoryBetween(id string, from, to time.Time, q tipkv.Query) iter.Seq2[Doc[T], error] {
	return c.historyBetween(c.store, id, from, to, q)
}

func (c *Collection[T]) historyBetween(r engine.Reader, id string, from, to time.Time, q tipkv.Query) iter.Seq2[Doc[T], error] {
	return func(yield func(Doc[T], error) bool) {
		q, ok, err := c.betweenQuery(r, id, from, to, q)
		if err != nil {
			yield(Doc[T]{}, fmt.Errorf("history of %s: %w", c.where(id), err))
			return
		}
		if !ok {
			return
		}
		stopped, err := c.history(r, id, q, yield)
		if err != nil && !stopped {
			yield(Doc[T]{}, fmt.Errorf("history of %s: %w", c.where(id), err))
		}
	}
}

// betweenQuery turns [from, to] into the version bounds of q: ok false
// when no version is in it.
func (c *Collection[T]) betweenQuery(r engine.Reader, id string, from, to time.Time, q tipkv.Query) (_ tipkv.Query, ok bool, err error) {
	if err := checkID(c.name, id); err != nil {
		return q, false, err
	}
	if q.From != 0 || q.To != 0 {
		return q, false, fmt.Errorf("%w: HistoryBetween takes times, not Query.From or Query.To", tipkv.ErrInvalid)
	}
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		return q, false, nil
	}
	tl, err := c.openTimeline(r, c.docPrefix(nil, id))
	if err != nil {
		return q, false, err
	}
	defer func() {
		if cerr := tl.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	// No version before from: versions of a document dropped whole may
	// have been there (see horizon.go). A zero from asks from the oldest
	// version kept.
	noneBefore := func() error {
		if from.IsZero() {
			return nil
		}
		return c.noneAt(r, id, from)
	}
	if tl.latest == 0 {
		return q, false, noneBefore()
	}
	q.To = tl.latest
	if !to.IsZero() {
		v, _, ans, err := tl.at(unixNano(to))
		if err != nil {
			return q, false, err
		}
		switch ans {
		case none:
			return q, false, noneBefore()
		case answered:
			q.To = v
		default:
			return q, false, c.timeAnswerErr(id, to, tl, ans)
		}
	}
	q.From = 1
	if !from.IsZero() {
		// The first version at or after from follows the last one before it.
		v, _, ans, err := tl.at(unixNano(from) - 1)
		if err != nil {
			return q, false, err
		}
		switch {
		case ans == none:
			if err := noneBefore(); err != nil {
				return q, false, err
			}
		case ans == answered:
			q.From = v + 1
		case ans == pruned && tl.otime == unixNano(from):
			q.From = tl.oldest // the versions dropped were all before from
		default:
			return q, false, c.timeAnswerErr(id, from, tl, ans)
		}
	}
	return q, q.From <= q.To, nil
}

// unixNano is t in Unix nanoseconds, clamped to what commit times hold.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(MinTime):
		return 0
	case t.After(MaxTime):
		return MaxTime.UnixNano()
	}
	return t.UnixNano()
}
