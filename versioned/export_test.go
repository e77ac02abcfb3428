package versioned

import (
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/knobs"
)

// Test hooks: the black-box tests in versioned_test reach the parsers and
// the iterator wrapper through these.

// ParseHistoryCursor parses a History cursor of collection coll, document id.
func ParseHistoryCursor(c tipkv.Cursor, coll, id string) (int64, error) {
	return parseNumberCursor(c, kindHistory, codec.AppendString(namePrefix(codec.FamilyVersions, coll), id))
}

// ParseLatestAllCursor parses a LatestAll cursor of collection coll.
func ParseLatestAllCursor(c tipkv.Cursor, coll string) (string, error) {
	return parseIDCursor(c, namePrefix(codec.FamilyVersions, coll))
}

// ParseFeedCursor parses a feed cursor of stream.
func ParseFeedCursor(c tipkv.Cursor, stream string) (int64, error) {
	return parseNumberCursor(c, kindFeed, namePrefix(codec.FamilyFeed, stream))
}

// DecodedKey is a decoded version or feed key.
type DecodedKey struct {
	Family codec.Family
	Name   string
	ID     string
	N      int64
}

// DecodeKey decodes a version or feed key.
func DecodeKey(b []byte) (DecodedKey, error) {
	k, err := decodeKey(b)
	return DecodedKey{k.family, k.name, k.id, k.n}, err
}

// WrapIters makes every iterator the package opens go through wrap, until
// the returned function is called. Not safe with parallel tests.
func WrapIters(wrap func(engine.Iter) engine.Iter) (restore func()) {
	return knobs.Set(&knobs.Versioned.WrapIter, wrap)
}

// TraceDeletes calls f with every delete the package writes: [lo, hi) for
// a range delete, hi nil for a point delete of lo; until the returned
// function is called. Not safe with parallel tests.
func TraceDeletes(f func(lo, hi []byte)) (restore func()) {
	return knobs.Set(&knobs.Versioned.TraceDelete, f)
}

// SetWatchWholeRange makes every Watch of a DB opened afterwards find the
// oldest version over the document's whole range, as before issue 30's
// fix, until the returned function is called (after those DBs close).
func SetWatchWholeRange(on bool) (restore func()) {
	return knobs.Set(&knobs.Versioned.WatchWholeRange, on)
}

// SetDropRangeMin sets the fewest versions or events dropped with one
// range delete, until the returned function is called.
func SetDropRangeMin(n int) (restore func()) { return knobs.Set(&knobs.Versioned.DropRangeMin, n) }

// SetCacheEntries bounds the latest-version cache of the DBs whose first
// handle is made afterwards, until the returned function is called.
func SetCacheEntries(n int) (restore func()) { return knobs.Set(&knobs.Versioned.CacheEntries, n) }

// OnWait calls f whenever a write starts waiting for a document or stream
// another Update holds, until the returned function is called. Not safe
// with parallel tests.
func OnWait(f func()) (restore func()) { return knobs.Set(&knobs.Versioned.OnWait, f) }

// OnWatchSleep calls f whenever a Watch goes to sleep, until the returned
// function is called. Not safe with parallel tests.
func OnWatchSleep(f func()) (restore func()) { return knobs.Set(&knobs.Versioned.OnWatchSleep, f) }

// OnFilterWalk makes f run when a miss filter build is about to walk the
// collection, until the returned function is called. Not safe with
// parallel tests.
func OnFilterWalk(f func()) (restore func()) { return knobs.Set(&knobs.Versioned.OnFilterWalk, f) }

// OnFilterGrown makes f run after every background grow of a miss filter,
// until the returned function is called.
func OnFilterGrown(f func()) (restore func()) { return knobs.Set(&knobs.Versioned.OnFilterGrown, f) }

// OnLearn makes f run whenever a read of a latest version is about to
// record it in the version cache, until the returned function is called.
// Not safe with parallel tests.
func OnLearn(f func()) (restore func()) { return knobs.Set(&knobs.Versioned.OnLearn, f) }

// FilterCap returns the capacity of the collection's miss filter, 0 if it
// has none.
func FilterCap[T any](c *Collection[T]) int64 {
	if c.filter == nil {
		return 0
	}
	if f := c.filter.cur.Load(); f != nil {
		return f.cap
	}
	return 0
}
