package versioned

import (
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
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
	wrapIter = wrap
	return func() { wrapIter = nil }
}

// TraceDeletes calls f with every delete the package writes: [lo, hi) for
// a range delete, hi nil for a point delete of lo; until the returned
// function is called. Not safe with parallel tests.
func TraceDeletes(f func(lo, hi []byte)) (restore func()) {
	traceDelete = f
	return func() { traceDelete = nil }
}

// SetRangeDeleteMin sets the fewest versions or events dropped with one
// range delete, until the returned function is called.
func SetRangeDeleteMin(n int) (restore func()) {
	old := rangeDeleteMin
	rangeDeleteMin = n
	return func() { rangeDeleteMin = old }
}

// SetCacheEntries bounds the latest-version cache of the DBs whose first
// handle is made afterwards, until the returned function is called.
func SetCacheEntries(n int) (restore func()) {
	old := cacheEntries
	cacheEntries = n
	return func() { cacheEntries = old }
}

// OnWait calls f whenever a write starts waiting for a document or stream
// another Update holds, until the returned function is called. Not safe
// with parallel tests.
func OnWait(f func()) (restore func()) {
	onWait = f
	return func() { onWait = nil }
}
