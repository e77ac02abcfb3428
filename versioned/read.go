package versioned

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/knobs"
)

// Doc is one version of a document, as a read returns it. Value is decoded
// into memory of its own: the caller may keep it.
type Doc[T any] struct {
	ID      string
	Version int64
	Value   T
	// Deleted marks a delete marker: the version Delete wrote. Value is
	// then the zero T. Only History and HistoryPage yield markers; the
	// other reads answer ErrNotFound where the version they would return
	// is one (LatestAll and LatestMany skip it).
	Deleted bool
	// Time is the version's commit time (see Put), read from the stored
	// value with it, at no extra cost. Within one document, times increase
	// with versions. It is the zero time for a version written before
	// store format 4, which recorded none (see Untimed).
	Time time.Time

	coll string
	kind byte
	meta []byte // the encoded metadata, nil for none
}

// Metadata returns the metadata the version was written with
// (tipkv.WithMetadata, tipkv.Batch.SetMetadata): the zero Metadata when it
// has none. It is decoded now, not by the read that returned d, so reads
// that do not ask pay nothing for it. Metadata that does not decode is
// ErrCorrupt.
func (d Doc[T]) Metadata() (tipkv.Metadata, error) {
	if d.meta == nil {
		return tipkv.Metadata{}, nil
	}
	m, err := docfmt.ParseMeta(d.meta)
	if err != nil {
		return tipkv.Metadata{}, fmt.Errorf("%w: collection %q, id %q, version %d: %w", tipkv.ErrCorrupt, d.coll, d.ID, d.Version, err)
	}
	return tipkv.Metadata(m), nil
}

// HasMetadata reports whether the version was written with metadata,
// without decoding it.
func (d Doc[T]) HasMetadata() bool { return d.meta != nil }

// Cursor returns the position just after d in the read that returned it,
// for Query.After: a History cursor (older versions of d.ID) for History,
// HistoryPage, Latest, LatestMany, Get and AsOf; a LatestAll cursor
// (documents after d.ID) for LatestAll. The zero Doc has the empty cursor.
func (d Doc[T]) Cursor() tipkv.Cursor {
	scope := namePrefix(codec.FamilyVersions, d.coll)
	switch d.kind {
	case kindHistory:
		return numberCursor(kindHistory, codec.AppendString(scope, d.ID), d.Version)
	case kindAll:
		return makeCursor(kindAll, scope, []byte(d.ID))
	}
	return ""
}

// Untimed reports whether the version was written before commit times
// existed (by store format 3 or older): its Time is then the zero time,
// and reads by time that need it say so.
func (d Doc[T]) Untimed() bool { return d.Time.IsZero() }

// timeOf is a commit time as a time.Time: the zero time for 0 (none).
func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// doc decodes a version, or returns a delete marker's Doc. The codec decodes into scratch (its pointer goes
// through an interface, so whatever it points into is on the heap): a
// recycled or per-read scratch spares an allocation per Doc. scratch is
// zeroed first (a codec may merge into what is there) but not after: the
// caller clears a scratch it keeps.
func (c *Collection[T]) doc(id string, v int64, raw []byte, kind byte, scratch *T) (Doc[T], error) {
	ver := c.fm.Parse(raw)
	var meta []byte
	if ver.Meta != nil {
		meta = bytes.Clone(ver.Meta) // raw lives as long as the read's iterator or buffer
	}
	if ver.Deleted {
		return Doc[T]{ID: id, Version: v, Deleted: true, Time: timeOf(ver.Time), coll: c.name, kind: kind, meta: meta}, nil
	}
	var zero T
	*scratch = zero
	err := c.codec.Decode(ver.Doc, scratch)
	val := *scratch
	if err != nil {
		if !errors.Is(err, tipkv.ErrCorrupt) {
			err = fmt.Errorf("%w: %w", tipkv.ErrCorrupt, err)
		}
		return Doc[T]{}, fmt.Errorf("%s, version %d: %w", c.where(id), v, err)
	}
	return Doc[T]{ID: id, Version: v, Value: val, Time: timeOf(ver.Time), coll: c.name, kind: kind, meta: meta}, nil
}

// expired reports whether raw, a stored version value, has expired by the
// DB's clock (read only for a version with an expiry).
func (c *Collection[T]) expired(raw []byte) bool {
	if !c.fm.HasExpiry(raw) {
		return false
	}
	return c.fm.Expired(raw, c.clock().UnixNano())
}

// docOne is doc with a recycled scratch, for the point reads: an expired
// version is ErrNotFound.
func (c *Collection[T]) docOne(id string, v int64, raw []byte) (Doc[T], error) {
	if c.expired(raw) {
		return Doc[T]{}, &notFoundError{coll: c.name, id: id, v: v, kind: expiredDoc}
	}
	p, ok := c.scratch.Get().(*T)
	if !ok {
		p = new(T)
	}
	d, err := c.doc(id, v, raw, kindHistory, p)
	var zero T
	*p = zero // the pool must not keep the value alive
	c.scratch.Put(p)
	return d, err
}

// Latest returns the latest version of the document id, or ErrNotFound
// when there is none or it is a delete marker (the document is deleted).
// It is one prefix seek; for a document that never existed the bloom
// filters usually answer it without reading a data block.
func (c *Collection[T]) Latest(id string) (Doc[T], error) {
	return c.seek(c.store, id, 0)
}

// AsOf returns the version of the document id that was latest when version
// v was written: the greatest version <= v, or ErrNotFound when there is
// none (the document is younger, or those versions were pruned) or it is a
// delete marker (the document was deleted then). One seek.
func (c *Collection[T]) AsOf(id string, v int64) (Doc[T], error) {
	return c.asOf(c.store, id, v)
}

func (c *Collection[T]) asOf(r engine.Reader, id string, v int64) (Doc[T], error) {
	if v < 1 {
		return Doc[T]{}, fmt.Errorf("%w: %s: AsOf version %d", tipkv.ErrInvalid, c.where(id), v)
	}
	return c.seek(r, id, v)
}

// seek returns the greatest version <= v (0: the latest) of id.
func (c *Collection[T]) seek(r engine.Reader, id string, v int64) (d Doc[T], err error) {
	if err := checkID(c.name, id); err != nil {
		return Doc[T]{}, err
	}
	buf := keyBufs.Get().(*[]byte)
	defer putKeyBuf(buf)
	b := c.docPrefix((*buf)[:0], id)
	n := len(b)
	live := r == c.store && !c.shared
	if v == 0 && live {
		// The latest version is known when this DB wrote or read the
		// document recently: a point Get of its key, or no read at all
		// (a second seek below teaches it, see writer.learn). The
		// version cache's hints come first (they hold the hot
		// documents), then the miss filter, then the cache under its
		// mutex.
		var purges uint64
		if c.values != nil {
			purges = c.w.purges.Load() // before the latest version is learnt: see valuecache.go
		}
		latest, deleted, found, ok := c.w.cache.hints.lookup(b)
		if !found {
			if c.missing(b) {
				return Doc[T]{}, &notFoundError{coll: c.name, id: id, kind: missingDoc}
			}
			latest, deleted, ok = c.w.knownLocked(b)
		}
		if ok {
			if latest == 0 {
				return Doc[T]{}, &notFoundError{coll: c.name, id: id, kind: missingDoc}
			}
			if deleted {
				return Doc[T]{}, &notFoundError{coll: c.name, id: id, deletedAt: latest, kind: deletedDoc}
			}
			if c.values != nil {
				if e, ok := c.values.get(b, latest, purges); ok {
					if e.expires != 0 && e.expires <= c.clock().UnixNano() {
						return Doc[T]{}, &notFoundError{coll: c.name, id: id, v: latest, kind: expiredDoc}
					}
					return e.doc, nil
				}
			}
			b = codec.AppendDesc(b, latest)
			k := len(b)
			b, err = engine.GetAppend(r, b, b[:k]) // the value after the key: no copy of its own
			*buf = b
			if err == nil {
				d, err := c.docOne(id, latest, b[k:])
				if err == nil && c.values != nil {
					_, expires := c.fm.Split(b[k:])
					c.values.fill(b[:n], d, expires, purges, len(b)-k)
				}
				return d, err
			}
			if !errors.Is(err, engine.ErrNotFound) {
				return Doc[T]{}, fmt.Errorf("%s, version %d: %w", c.where(id), latest, err)
			}
			// Not there after all (written around this package): seek.
			b = b[:n]
		}
	}
	if v > 0 {
		if live && c.missing(b) {
			return Doc[T]{}, &notFoundError{coll: c.name, id: id, v: v, kind: missingAsOf}
		}
		b = codec.AppendDesc(b, v)
	}
	m := len(b)
	b = codec.AppendDesc(append(b, b[:n]...), 0)
	*buf = b
	lo, hi := b[:m:m], b[m:]
	// A read of the latest version teaches the version cache (see
	// writer.learn), from the epoch before the iterator's snapshot, on
	// the document's second miss (see admission).
	learn := v == 0 && live && c.fm.Current() && !knobs.Versioned.NoLearn && c.w.cache.admit.second(lo)
	var epoch uint64
	if learn {
		epoch = c.w.cache.epoch.Load()
	}
	it, err := newIter(r, lo, hi, 1)
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s: %w", c.where(id), err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			d, err = Doc[T]{}, fmt.Errorf("%s: %w", c.where(id), cerr)
		}
	}()
	if !it.SeekPrefixGE(lo) {
		if err := it.Error(); err != nil {
			return Doc[T]{}, fmt.Errorf("%s: %w", c.where(id), err)
		}
		kind := missingDoc
		if v > 0 {
			kind = missingAsOf
		}
		return Doc[T]{}, &notFoundError{coll: c.name, id: id, v: v, kind: kind}
	}
	got, err := numberOf(it.Key(), n)
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s: %w", c.where(id), err)
	}
	raw, err := it.Value()
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s, version %d: %w", c.where(id), got, err)
	}
	if learn {
		if knobs.Versioned.OnLearn != nil {
			knobs.Versioned.OnLearn()
		}
		c.w.learn(lo, epoch, got, raw)
	}
	if c.fm.IsDeleteMarker(raw) {
		return Doc[T]{}, &notFoundError{coll: c.name, id: id, v: v, deletedAt: got, kind: deletedDoc}
	}
	return c.docOne(id, got, raw)
}

// Get returns version v of the document id, or ErrNotFound when there is
// no such version or it is a delete marker.
func (c *Collection[T]) Get(id string, v int64) (Doc[T], error) {
	return c.get(c.store, id, v)
}

func (c *Collection[T]) get(r engine.Reader, id string, v int64) (Doc[T], error) {
	if err := checkID(c.name, id); err != nil {
		return Doc[T]{}, err
	}
	if v < 1 {
		return Doc[T]{}, fmt.Errorf("%w: %s: version %d", tipkv.ErrInvalid, c.where(id), v)
	}
	prefix := c.docPrefix(nil, id)
	if r == c.store && c.missing(prefix) {
		return Doc[T]{}, &notFoundError{coll: c.name, id: id, v: v, kind: missingVersion}
	}
	raw, err := r.Get(codec.AppendDesc(prefix, v))
	if errors.Is(err, engine.ErrNotFound) {
		return Doc[T]{}, &notFoundError{coll: c.name, id: id, v: v, kind: missingVersion}
	}
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s, version %d: %w", c.where(id), v, err)
	}
	if c.fm.IsDeleteMarker(raw) {
		return Doc[T]{}, &notFoundError{coll: c.name, id: id, v: v, deletedAt: v, kind: deletedDoc}
	}
	return c.docOne(id, v, raw)
}

// History yields the versions of the document id newest first: the
// versions in [q.From, q.To] (zero: open), below the version of q.After
// when set, at most q.Limit of them (zero: all), delete markers included
// (as Docs with Deleted set). It is one seek and a forward scan bounded on
// both sides. A missing document yields nothing.
// An error (a bad query or cursor, a value that does not decode) is
// yielded once, as the last pair.
//
// To read page by page, pass the Cursor of the last Doc of a page as
// q.After for the next. Versions written meanwhile do not shift a page.
func (c *Collection[T]) History(id string, q tipkv.Query) iter.Seq2[Doc[T], error] {
	return c.historyOf(c.store, id, q)
}

func (c *Collection[T]) historyOf(r engine.Reader, id string, q tipkv.Query) iter.Seq2[Doc[T], error] {
	return func(yield func(Doc[T], error) bool) {
		stopped, err := c.history(r, id, q, yield)
		if err != nil && !stopped {
			yield(Doc[T]{}, fmt.Errorf("history of %s: %w", c.where(id), err))
		}
	}
}

func (c *Collection[T]) history(r engine.Reader, id string, q tipkv.Query, yield func(Doc[T], error) bool) (stopped bool, err error) {
	prefix, sp, ok, err := c.historySpan(id, q)
	if err != nil || !ok {
		return false, err
	}
	var sc newestScan
	if err := sc.open(r, prefix, sp, q.Limit); err != nil {
		return false, err
	}
	defer func() {
		if cerr := sc.close(); err == nil {
			err = cerr
		}
	}()
	scratch := new(T)
	for sc.next() {
		raw, err := sc.value()
		if err != nil {
			return false, err
		}
		if c.expired(raw) {
			sc.skip() // the limit counts the versions yielded
			continue
		}
		d, err := c.doc(id, sc.n, raw, kindHistory, scratch)
		if err != nil {
			return false, err
		}
		if !yield(d, nil) {
			return true, nil
		}
	}
	return false, sc.err
}

func (c *Collection[T]) historySpan(id string, q tipkv.Query) (prefix []byte, sp span, ok bool, err error) {
	if err := checkID(c.name, id); err != nil {
		return nil, span{}, false, err
	}
	if err := q.Validate(); err != nil {
		return nil, span{}, false, err
	}
	if q.Prefix != "" {
		return nil, span{}, false, fmt.Errorf("%w: Query.Prefix is for LatestAll", tipkv.ErrInvalid)
	}
	prefix = c.docPrefix(nil, id)
	var after int64
	if q.After != "" {
		if after, err = parseNumberCursor(q.After, kindHistory, prefix); err != nil {
			return nil, span{}, false, err
		}
	}
	sp, ok = spanOf(q, after)
	return prefix, sp, ok, nil
}

// LatestAll yields the latest version of every document of the collection
// in id order (bytewise), from the first id in [q.Prefix, q.Prefix+1)
// after the id of q.After (when set), at most q.Limit of them (zero: all).
// Deleted documents (whose latest version is a delete marker) are skipped.
// It is a skip-scan: one seek per document, however many versions each
// has. q.From and q.To must be zero. An error is yielded once, as the last
// pair.
func (c *Collection[T]) LatestAll(q tipkv.Query) iter.Seq2[Doc[T], error] {
	return c.latestAllOf(c.store, q)
}

func (c *Collection[T]) latestAllOf(r engine.Reader, q tipkv.Query) iter.Seq2[Doc[T], error] {
	return func(yield func(Doc[T], error) bool) {
		stopped := false
		err := c.latestAll(r, q, func(d Doc[T]) bool {
			stopped = !yield(d, nil)
			return !stopped
		})
		if err != nil && !stopped {
			yield(Doc[T]{}, fmt.Errorf("LatestAll of collection %q: %w", c.name, err))
		}
	}
}

func (c *Collection[T]) latestAll(r engine.Reader, q tipkv.Query, yield func(Doc[T]) bool) error {
	count := 0
	scratch := new(T)
	return c.walkLatest(r, q, "LatestAll", func(id string, v int64, _, raw []byte, _ engine.Iter) (bool, error) {
		if c.fm.IsDeleteMarker(raw) || c.expired(raw) {
			return true, nil
		}
		d, err := c.doc(id, v, raw, kindAll, scratch)
		if err != nil || !yield(d) {
			return false, err
		}
		count++
		return q.Limit <= 0 || count < q.Limit, nil
	})
}

// walkLatest walks the latest version of each document of [q.Prefix,
// q.Prefix+1) after the id of q.After, with one seek each (a skip-scan),
// calling visit with the document's id, the version, its key and its
// value (both valid until the next call); visit returns false to stop.
// what names the read in the error for version bounds, which it does not
// take.
func (c *Collection[T]) walkLatest(r engine.Reader, q tipkv.Query, what string, visit func(id string, v int64, k, raw []byte, it engine.Iter) (bool, error)) (err error) {
	if err := q.Validate(); err != nil {
		return err
	}
	if q.From != 0 || q.To != 0 {
		return fmt.Errorf("%w: %s takes no version bounds", tipkv.ErrInvalid, what)
	}
	lo := appendEscaped(append([]byte(nil), c.prefix...), q.Prefix)
	hi := codec.PrefixEnd(lo)
	if q.After != "" {
		id, err := parseIDCursor(q.After, c.prefix)
		if err != nil {
			return err
		}
		if next := codec.ImmediateSuccessor(nil, c.docPrefix(nil, id)); string(next) > string(lo) {
			lo = next
		}
		if string(lo) >= string(hi) {
			return nil
		}
	}
	it, err := newIter(r, lo, hi, 1)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok; ok = it.NextPrefix() {
		k := it.Key()
		id, v, err := decodeDocTail(k[len(c.prefix):])
		if err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		raw, err := it.Value()
		if err != nil {
			return err
		}
		if more, err := visit(id, v, k, raw, it); err != nil || !more {
			return err
		}
	}
	return it.Error()
}

// notFoundError is the ErrNotFound of a point read. A miss is a common
// answer (bloom filters make it cheap), so its message is only formatted
// when asked for.
type notFoundError struct {
	coll, id  string
	v         int64 // asked for: 0 for the latest
	deletedAt int64 // the marker's version, for deletedDoc
	kind      byte
}

const (
	missingDoc     byte = iota // Latest: no version at all
	missingAsOf                // AsOf: no version <= v
	missingVersion             // Get: no version v
	deletedDoc                 // the version read is a delete marker
	expiredDoc                 // the version read has expired (Options.TTL)
)

func (e *notFoundError) Error() string {
	where := fmt.Sprintf("%v: collection %q, id %q", tipkv.ErrNotFound, e.coll, e.id)
	switch e.kind {
	case deletedDoc:
		if e.v > 0 && e.v != e.deletedAt {
			return fmt.Sprintf("%s: as of version %d it was deleted (delete marker at version %d)", where, e.v, e.deletedAt)
		}
		return fmt.Sprintf("%s: deleted (delete marker at version %d)", where, e.deletedAt)
	case expiredDoc:
		return fmt.Sprintf("%s: version %d has expired", where, e.v)
	case missingAsOf:
		return fmt.Sprintf("%s: no version <= %d", where, e.v)
	case missingVersion:
		return fmt.Sprintf("%s, version %d", where, e.v)
	}
	return where
}

func (e *notFoundError) Unwrap() error { return tipkv.ErrNotFound }

// Count returns how many versions of the document id are kept, delete
// markers and expired versions not purged yet (Options.TTL) included: versions are dense from the oldest kept one to the
// latest, so that is latest-oldest+1, from two seeks of one iterator (one
// view of the store). A missing or purged document has 0.
func (c *Collection[T]) Count(id string) (int64, error) {
	return c.count(c.store, id)
}

func (c *Collection[T]) count(r engine.Reader, id string) (n int64, err error) {
	if err := checkID(c.name, id); err != nil {
		return 0, err
	}
	prefix := c.docPrefix(nil, id)
	if r == c.store && c.missing(prefix) {
		return 0, nil
	}
	it, err := newIter(r, prefix, numberKey(prefix, 0), 1)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.where(id), err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			n, err = 0, fmt.Errorf("%s: %w", c.where(id), cerr)
		}
	}()
	if !it.First() {
		return 0, it.Error()
	}
	latest, err := numberOf(it.Key(), len(prefix))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.where(id), err)
	}
	if !it.Last() {
		if err := it.Error(); err != nil {
			return 0, fmt.Errorf("%s: %w", c.where(id), err)
		}
		return 0, fmt.Errorf("%w: %s: no oldest version under the latest %d", tipkv.ErrCorrupt, c.where(id), latest)
	}
	oldest, err := numberOf(it.Key(), len(prefix))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.where(id), err)
	}
	return latest - oldest + 1, nil
}

// LatestMany returns the latest version of each of ids, in a slice aligned
// with ids: docs[i] is the latest version of ids[i], or the zero Doc
// (Version 0, which no version has) when ids[i] has none, is deleted or
// has expired. An
// id may appear more than once. It is one prefix seek per distinct id, in
// key order on one iterator, each answered by the bloom filters for a
// document that never existed. An empty or oversized id is ErrInvalid and
// reads nothing; a value that does not decode fails the whole call.
//
// A slice, not a map: it keeps the caller's order and duplicates, costs
// no hashing, and a miss is as plain as docs[i].Version == 0.
func (c *Collection[T]) LatestMany(ids ...string) ([]Doc[T], error) {
	return c.latestMany(c.store, ids)
}

func (c *Collection[T]) latestMany(r engine.Reader, ids []string) (docs []Doc[T], err error) {
	for _, id := range ids {
		if err := checkID(c.name, id); err != nil {
			return nil, err
		}
	}
	docs = make([]Doc[T], len(ids))
	if len(ids) == 0 {
		return docs, nil
	}
	prefixes := make([][]byte, len(ids))
	order := make([]int, len(ids))
	for i, id := range ids {
		prefixes[i], order[i] = c.docPrefix(nil, id), i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(prefixes[a], prefixes[b]) })
	live := r == c.store
	it, err := newIter(r, c.prefix, codec.PrefixEnd(c.prefix), 1)
	if err != nil {
		return nil, fmt.Errorf("collection %q: %w", c.name, err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			docs, err = nil, fmt.Errorf("collection %q: %w", c.name, cerr)
		}
	}()
	scratch := new(T)
	for k, i := range order {
		if k > 0 && ids[order[k-1]] == ids[i] {
			docs[i] = docs[order[k-1]]
			continue
		}
		if live && c.missing(prefixes[i]) {
			continue
		}
		if !it.SeekPrefixGE(prefixes[i]) {
			if err := it.Error(); err != nil {
				return nil, fmt.Errorf("%s: %w", c.where(ids[i]), err)
			}
			continue
		}
		v, err := numberOf(it.Key(), len(prefixes[i]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.where(ids[i]), err)
		}
		raw, err := it.Value()
		if err != nil {
			return nil, fmt.Errorf("%s, version %d: %w", c.where(ids[i]), v, err)
		}
		if c.fm.IsDeleteMarker(raw) || c.expired(raw) {
			continue
		}
		if docs[i], err = c.doc(ids[i], v, raw, kindHistory, scratch); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// HistoryPage reads one page of History: at most q.Limit versions (zero:
// all) of the document id, newest first, and the cursor of the next page,
// empty when there is none. It reads one version more than the page to
// know, so an empty next means the read ended, not that it may have.
//
// Pass next as q.After to read the next page; versions written meanwhile
// do not shift it.
func (c *Collection[T]) HistoryPage(id string, q tipkv.Query) (docs []Doc[T], next tipkv.Cursor, err error) {
	return c.historyPage(c.store, id, q)
}

func (c *Collection[T]) historyPage(r engine.Reader, id string, q tipkv.Query) (docs []Doc[T], next tipkv.Cursor, err error) {
	limit := q.Limit
	if limit > 0 && limit < math.MaxInt {
		q.Limit = limit + 1
	}
	for d, err := range c.historyOf(r, id, q) {
		if err != nil {
			return nil, "", err
		}
		docs = append(docs, d)
	}
	if limit > 0 && len(docs) > limit {
		docs = docs[:limit:limit]
		next = docs[limit-1].Cursor()
	}
	return docs, next, nil
}
