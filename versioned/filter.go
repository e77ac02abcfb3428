package versioned

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/knobs"
)

// The miss filter (Options.MissFilter) is a blocked Bloom filter of the
// documents of one collection of one DB, kept in memory, so that a read of
// a document that was never written answers ErrNotFound without reaching
// the store. A "no" is certain; a "maybe" reads the store as before.
//
// It holds every document that had a version at any moment since its
// build started, and it never forgets one (a purged document stays a
// "maybe"):
//
//   - a write of a document adds it once it holds the document's lock
//     (Collection.lock), before anything the write does can be applied;
//   - a build first marks the slot as building, under the writer's mutex,
//     and in the same critical section records every document some Tx
//     holds then (its write may have looked at the slot before, and it can
//     only apply while it holds the document); a Tx that takes a lock
//     afterwards sees the mark and records its document in the slot's
//     pending list as well as in the current filter;
//   - then it walks the collection, one seek per document (LatestAll's
//     skip-scan), in pages of a fresh iterator each: a document that was
//     in the store when the build started is still there when the walk
//     passes it, or was purged meanwhile and needs no entry;
//   - last, under the slot's mutex, it adds the pending list and makes
//     the filter the current one; a write that finds the mark gone adds
//     to that one.
//
// Reads consult the current filter, when there is one, only for reads of
// the live store (not a Snapshot's, which may hold documents purged before
// the build, nor a Batch's). When the documents added outgrow its
// capacity, a filter twice the size is built the same way in the
// background while the current one keeps answering.
//
// On a shared engine other processes create documents this DB never sees,
// so there is no filter: the option does nothing there.
type missFilter struct {
	words []atomic.Uint64 // blocks of filterBlockWords words
	nblk  uint64
	cap   int64        // documents it is sized for
	added atomic.Int64 // documents added that were not "maybe" already
}

// filterSlot is the filter state of one collection name in one DB, shared
// by its handles (writer.filterSlot).
type filterSlot struct {
	cur      atomic.Pointer[missFilter] // complete: reads consult it
	building atomic.Bool                // set under writer.mu, cleared under pmu
	pmu      sync.Mutex
	pending  []uint64   // guarded by pmu: the hashes written during a build
	mu       sync.Mutex // one build at a time
	grow     atomic.Bool
}

const (
	filterBlockWords = 8  // 512 bits: one cache line a lookup
	filterBits       = 10 // per document, at capacity
	filterProbes     = 7  // bits set per document
	filterMinDocs    = 4096
	filterPage       = 4096 // documents a walk reads per iterator
)

var filterSeed = maphash.MakeSeed()

func newMissFilter(capacity int64) *missFilter {
	capacity = max(capacity, filterMinDocs)
	nblk := (uint64(capacity)*filterBits + 511) / 512
	return &missFilter{words: make([]atomic.Uint64, nblk*filterBlockWords), nblk: nblk, cap: capacity}
}

// probe returns the block of h and the bits of the probes in it.
func (f *missFilter) probe(h uint64) (blk []atomic.Uint64, mask [filterBlockWords]uint64) {
	hi, _ := bits.Mul64(h, f.nblk)
	blk = f.words[hi*filterBlockWords : (hi+1)*filterBlockWords]
	x := (h ^ h>>29) * 0x9E3779B97F4A7C15
	for range filterProbes {
		bit := x & 511
		mask[bit>>6] |= 1 << (bit & 63)
		x >>= 9
	}
	return blk, mask
}

// has reports whether the document whose hash is h may be in f.
func (f *missFilter) has(h uint64) bool {
	blk, mask := f.probe(h)
	for i, m := range mask {
		if m != 0 && blk[i].Load()&m != m {
			return false
		}
	}
	return true
}

// add adds the document whose hash is h, and reports whether f has
// outgrown its capacity.
func (f *missFilter) add(h uint64) bool {
	blk, mask := f.probe(h)
	fresh := false
	for i, m := range mask {
		if m != 0 && blk[i].Load()&m != m {
			blk[i].Or(m)
			fresh = true
		}
	}
	return fresh && f.added.Add(1) > f.cap
}

// pendingLen returns how many hashes are pending.
func (s *filterSlot) pendingLen() int {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return len(s.pending)
}

func docHash(prefix []byte) uint64 { return maphash.Bytes(filterSeed, prefix) }

// filterSlot returns the filter state of the collection name, shared by
// every handle of the DB.
func (w *writer) filterSlot(name string) *filterSlot {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.filters == nil {
		w.filters = map[string]*filterSlot{}
	}
	s, ok := w.filters[name]
	if !ok {
		s = &filterSlot{}
		w.filters[name] = s
	}
	return s
}

// filterAdd adds the document under prefix to the collection's filter, if
// it has one or is building one: called by a Tx holding the document's
// lock, before the Tx can apply.
func (c *Collection[T]) filterAdd(prefix []byte) {
	s := c.filter
	if s == nil {
		return
	}
	building, f := s.building.Load(), s.cur.Load()
	if !building && f == nil {
		return
	}
	h := docHash(prefix)
	if building {
		s.pmu.Lock()
		if s.building.Load() {
			s.pending = append(s.pending, h)
		}
		s.pmu.Unlock()
		f = s.cur.Load() // a build may have ended meanwhile
	}
	if f != nil && f.add(h) && s.grow.CompareAndSwap(false, true) {
		go func() {
			_ = c.buildFilter(true) // on failure the current filter stays: only less sharp
			s.grow.Store(false)
			if knobs.Versioned.OnFilterGrown != nil {
				knobs.Versioned.OnFilterGrown()
			}
		}()
	}
}

// missing reports whether the collection's filter knows for certain that
// the document under prefix has never had a version.
func (c *Collection[T]) missing(prefix []byte) bool {
	if c.filter == nil {
		return false
	}
	f := c.filter.cur.Load()
	return f != nil && !f.has(docHash(prefix))
}

// openFilter gives the handle the collection's filter state, which every
// handle's writes must keep (on an exclusive engine), and builds the
// filter if the handle asks for one (want) and the DB has none yet.
func (c *Collection[T]) openFilter(want bool) error {
	if c.shared {
		return nil
	}
	c.filter = c.w.filterSlot(c.name)
	if !want || c.filter.cur.Load() != nil {
		return nil
	}
	return c.buildFilter(false)
}

// buildFilter builds the collection's filter (grow: a bigger one while the
// current one answers) and makes it the current one.
func (c *Collection[T]) buildFilter(grow bool) error {
	s := c.filter
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	if !grow && old != nil {
		return nil // another handle built it meanwhile
	}
	w := c.w
	w.mu.Lock()
	s.pmu.Lock()
	s.building.Store(true)
	s.pending = s.pending[:0]
	s.pmu.Unlock()
	var hs []uint64
	for _, m := range []map[string]*docEntry{w.cache.cur, w.cache.old} {
		for k, e := range m {
			if e.holder != nil && len(k) > len(c.prefix) && k[:len(c.prefix)] == string(c.prefix) {
				hs = append(hs, maphash.String(filterSeed, k))
			}
		}
	}
	w.mu.Unlock()
	if knobs.Versioned.OnFilterWalk != nil {
		knobs.Versioned.OnFilterWalk()
	}
	hs, err := c.walkDocs(hs)
	if err != nil {
		s.pmu.Lock()
		s.building.Store(false)
		s.pending = nil
		s.pmu.Unlock()
		return fmt.Errorf("collection %q: building the miss filter: %w", c.name, err)
	}
	f := newMissFilter(2 * int64(len(hs)+s.pendingLen()))
	for _, h := range hs {
		f.add(h)
	}
	s.pmu.Lock()
	for _, h := range s.pending {
		f.add(h)
	}
	s.cur.Store(f)
	s.building.Store(false)
	s.pending = nil
	s.pmu.Unlock()
	return nil
}

// walkDocs appends the hash of every document of the collection to hs,
// one seek per document.
func (c *Collection[T]) walkDocs(hs []uint64) ([]uint64, error) {
	err := walkPrefixes(c.store, c.prefix, codec.PrefixEnd(c.prefix), filterPage, func(it engine.Iter) error {
		k := it.Key()
		if len(k) < len(c.prefix)+codec.NumberSize {
			return fmt.Errorf("%w: key %x: too short for a version", tipkv.ErrCorrupt, k)
		}
		hs = append(hs, docHash(k[:len(k)-codec.NumberSize]))
		return nil
	}, nil)
	return hs, err
}
