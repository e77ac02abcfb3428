package versioned

import (
	"hash/maphash"
	"sync"
)

// valueCache keeps the latest decoded version of a collection's most read
// documents (Options.ValueCache), so that Latest of a hot document is a
// lookup: no engine Get, no decoding.
//
// An entry holds a document's Doc as decoded at version v, and is served
// only when the version hints (hints.go) say v is the document's latest
// version at the call: on an exclusive engine they are exact whenever
// they are known, and a version's stored value never changes, so the
// entry is that version's value. The one way a version number comes back
// with another value is a whole-document drop (Purge, PurgeExpired,
// PruneBefore of every version), after which the document starts again at
// version 1; writer.purges counts those drops, bumped when the Tx that
// dropped releases the document and before its new state is visible, and
// an entry holds the count read before the version it was filled from: a
// different count now and it is not served. So an entry is never a value
// the document does not hold at its latest version, and writes need not
// find it: it is replaced by the next read after one.
//
// Entries are filled by Latest on the path that knows the latest version
// (a point Get), never by reads of a snapshot or a Batch. Memory is bounded
// by Options.ValueCache bytes, counted per entry as the stored value's
// size plus its key plus valueEntryOverhead; the cache keeps two
// generations per shard and drops the older one when the newer one is
// half the shard's budget.
type valueCache[T any] struct {
	seed   maphash.Seed
	budget int64 // per shard
	shards [valueShards]valueShard[T]
}

// valueShards spreads the cache over locks, so that readers of different
// documents rarely meet.
const valueShards = 16

// valueEntryOverhead is what an entry costs beside its value and key: the
// map's slot and the Doc's fields (id, version, time, metadata slice).
const valueEntryOverhead = 160

type valueShard[T any] struct {
	mu       sync.Mutex
	cur, old map[string]*cachedDoc[T]
	bytes    int64 // counted in cur
}

type cachedDoc[T any] struct {
	doc     Doc[T]
	expires int64  // Unix ns, 0: none
	purges  uint64 // writer.purges when the version was read
	size    int64
}

func newValueCache[T any](bytes int64) *valueCache[T] {
	vc := &valueCache[T]{seed: maphash.MakeSeed(), budget: max(bytes/valueShards, 1)}
	for i := range vc.shards {
		vc.shards[i].cur = map[string]*cachedDoc[T]{}
	}
	return vc
}

func (vc *valueCache[T]) shard(prefix []byte) *valueShard[T] {
	return &vc.shards[maphash.Bytes(vc.seed, prefix)%valueShards]
}

// get returns the entry of the document under prefix if it holds version
// v and was filled since the last whole-document drop (purges).
func (vc *valueCache[T]) get(prefix []byte, v int64, purges uint64) (*cachedDoc[T], bool) {
	s := vc.shard(prefix)
	s.mu.Lock()
	e, ok := s.cur[string(prefix)]
	if !ok {
		if e, ok = s.old[string(prefix)]; ok {
			delete(s.old, string(prefix))
			s.put(string(prefix), e, vc.budget)
		}
	}
	s.mu.Unlock()
	if !ok || e.doc.Version != v || e.purges != purges {
		return nil, false
	}
	return e, true
}

// fill records d, read at its latest version from a stored value of size
// bytes, with the drop count loaded before its version was learnt.
func (vc *valueCache[T]) fill(prefix []byte, d Doc[T], expires int64, purges uint64, size int) {
	e := &cachedDoc[T]{doc: d, expires: expires, purges: purges, size: int64(size+len(prefix)) + valueEntryOverhead}
	s := vc.shard(prefix)
	s.mu.Lock()
	if old, ok := s.cur[string(prefix)]; ok {
		s.bytes -= old.size
	} else {
		delete(s.old, string(prefix))
	}
	s.put(string(prefix), e, vc.budget)
	s.mu.Unlock()
}

// put adds e to cur under key (not in cur), turning generations over when
// cur is half the budget. s.mu is held.
func (s *valueShard[T]) put(key string, e *cachedDoc[T], budget int64) {
	if e.size > budget/2 {
		return // would evict everything else: not worth it
	}
	if s.bytes+e.size > budget/2 {
		s.old, s.cur, s.bytes = s.cur, make(map[string]*cachedDoc[T], len(s.cur)), 0
	}
	s.cur[key] = e
	s.bytes += e.size
}
