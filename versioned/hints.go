package versioned

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// hints lets Latest learn a document's latest version from the version
// cache without the writer's mutex: readers load one slot and one word,
// writers pay a hash and two stores when they release a document.
//
// Every docEntry carries pub, its committed latest version published for
// readers: 0 (unknown) from the moment a Tx takes the entry's lock, before
// anything the Tx writes can be applied, until the Tx releases it, and
// from the moment the entry is dropped from a generation of the cache
// (it may live on in the other, where the mutex path finds it) until a Tx
// releases it again; otherwise what the entry's state knows (see
// writer.unlock). So whenever a reader finds pub
// known, it is the store's latest version at that instant, on an exclusive
// engine where every version is written under the entry's lock; a reader
// that loads it just before a Tx takes the lock answers as of before that
// Tx, which is still running.
//
// The table is direct-mapped: a slot holds the entry published last among
// the keys that hash to it. A slot holding another key, or none, sends the
// reader to the mutex path (writer.knownLocked), so a collision costs what
// every lookup cost before, never a wrong answer; a slot's entry that has
// left the cache has pub 0, and the reader seeks.
type hints struct {
	seed  maphash.Seed
	slots atomic.Pointer[[]atomic.Pointer[docEntry]]
}

const (
	pubKnown   = 1 << 0
	pubDeleted = 1 << 1
	pubShift   = 2
)

func encodePub(s *docState) uint64 {
	if !s.latestKnown || s.latest < 0 {
		return 0
	}
	p := uint64(s.latest)<<pubShift | pubKnown
	if s.deleted {
		p |= pubDeleted
	}
	return p
}

// size makes the table hold about n entries (a power of two >= n); the
// entries of the table it replaces stay correct (their pub is theirs) and
// are found by the mutex path meanwhile.
func (h *hints) size(n int) {
	n = max(n, 64)
	if s := h.slots.Load(); s != nil && len(*s) >= n {
		return
	}
	slots := make([]atomic.Pointer[docEntry], 1<<bits.Len(uint(n-1)))
	h.slots.Store(&slots)
}

// publish sets e's pub from its committed state and, when known, puts e in
// its slot. Called with writer.mu held, the entry not held by a Tx.
func (h *hints) publish(e *docEntry) {
	p := encodePub(&e.state)
	e.pub.Store(p)
	if p == 0 {
		return
	}
	slots := *h.slots.Load()
	slots[maphash.String(h.seed, e.key)&uint64(len(slots)-1)].Store(e)
}

// retire marks e, dropped from a generation of the cache, unknown and
// frees its slot. Called with writer.mu held.
func (h *hints) retire(e *docEntry) {
	e.pub.Store(0)
	slots := *h.slots.Load()
	slots[maphash.String(h.seed, e.key)&uint64(len(slots)-1)].CompareAndSwap(e, nil)
}

// lookup returns the published latest version of the document under
// prefix: found reports that the slot held its entry, ok that the entry
// knew the version.
func (h *hints) lookup(prefix []byte) (latest int64, deleted, found, ok bool) {
	slots := *h.slots.Load()
	e := slots[maphash.Bytes(h.seed, prefix)&uint64(len(slots)-1)].Load()
	if e == nil || e.key != string(prefix) {
		return 0, false, false, false
	}
	p := e.pub.Load()
	if p == 0 {
		return 0, false, true, false
	}
	return int64(p >> pubShift), p&pubDeleted != 0, true, true
}
