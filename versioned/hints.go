package versioned

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// hints lets Latest learn a document's latest version from the version
// cache without the writer's mutex, and for most keys without touching the
// cache's entry: a reader loads one slot of a table, one cache line that
// holds the key and its latest version; writers pay a hash and a few
// stores when they take or release a document.
//
// Every docEntry carries pub, its committed latest version published for
// readers: 0 (unknown) from the moment a Tx takes the entry's lock, before
// anything the Tx writes can be applied, until the Tx releases it, and
// from the moment the entry is dropped from a generation of the cache
// (it may live on in the other, where the mutex path finds it) until a Tx
// releases it again; otherwise what the entry's state knows (see
// writer.unlock). So whenever a reader finds pub known, it is the store's
// latest version at that instant, on an exclusive engine where every
// version is written under the entry's lock; a reader that loads it just
// before a Tx takes the lock answers as of before that Tx, which is still
// running.
//
// The table is direct-mapped: a slot holds the key published last among
// the keys that hash to it, and a copy of its entry's pub, changed with
// it under the writer's mutex. A key of up to hintKeyMax bytes (a document
// prefix: the family byte, the collection name and the id, each escaped
// and ended) is held in the slot itself, behind a sequence word that is
// odd while a writer changes the slot (a seqlock): a reader that sees the
// word change, or odd, treats the slot as empty. A longer key is held in
// a second table of entry pointers, made at the first such key, and read
// as the entry's own pub. A slot holding another key, or none, sends the
// reader to the mutex path (writer.knownLocked), so a collision costs what
// every lookup cost before, never a wrong answer.
//
// When the table grows (writer.grow), readers that loaded the old one may
// still read it: it is no longer written, so what it says was true when
// it was replaced, during their call.
type hints struct {
	seed  maphash.Seed
	slots atomic.Pointer[[]hintSlot]
	long  atomic.Pointer[[]atomic.Pointer[docEntry]] // nil until a longer key
}

// hintKeyMax is the longest key a slot holds: 64 bytes a slot, one cache
// line.
const hintKeyMax = 8 * hintKeyWords

const hintKeyWords = 6

// hintSlot is a slot of the table. seq is gen<<8 | len<<1 | busy, len the
// key's length (0: empty), busy set while a writer changes the slot; pub
// is the published version (see encodePub) and key the key's bytes,
// little-endian words padded with zeros. Every field is an atomic word, so
// that readers racing a writer read whole words.
type hintSlot struct {
	seq atomic.Uint64
	pub atomic.Uint64
	key [hintKeyWords]atomic.Uint64
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

// hintSlotsPerEntry is how many slots the table keeps per entry of the
// cache while it grows: a direct-mapped table shares a slot between two of
// n keys in about n/slots of them, and two hot keys sharing one read
// through the mutex.
const hintSlotsPerEntry = 8

// fit doubles the table while it has fewer than hintSlotsPerEntry slots per
// entry of the cache, up to limit slots (the cache's capacity): a DB that
// remembers few documents keeps a small table. Called with writer.mu held.
func (h *hints) fit(entries, limit int) {
	n := len(*h.slots.Load())
	if n >= limit || entries*hintSlotsPerEntry <= n {
		return
	}
	for n < limit && entries*hintSlotsPerEntry > n {
		n *= 2
	}
	h.size(min(n, limit))
}

// size makes the table hold about n entries (a power of two >= n, 64 at
// least). Called with writer.mu held; the old table's keys are published
// again as their entries are released or read under the mutex
// (writer.knownLocked).
func (h *hints) size(n int) {
	n = max(n, 64)
	if s := h.slots.Load(); s != nil && len(*s) >= n {
		return
	}
	n = 1 << bits.Len(uint(n-1))
	slots := make([]hintSlot, n)
	h.slots.Store(&slots)
	if h.long.Load() != nil {
		long := make([]atomic.Pointer[docEntry], n)
		h.long.Store(&long)
	}
}

func (h *hints) index(key string, n int) uint64 {
	return maphash.String(h.seed, key) & uint64(n-1)
}

// publish sets e's pub from its committed state and, when known, puts e's
// key in its slot. Called with writer.mu held, the entry not held by a Tx.
func (h *hints) publish(e *docEntry) {
	p := encodePub(&e.state)
	if p == 0 {
		h.unpublish(e)
		return
	}
	e.pub.Store(p)
	slots := *h.slots.Load()
	i := h.index(e.key, len(slots))
	if len(e.key) <= hintKeyMax {
		slots[i].write(e.key, p)
		return
	}
	lp := h.long.Load()
	if lp == nil {
		long := make([]atomic.Pointer[docEntry], len(slots))
		lp = &long
		h.long.Store(lp)
	}
	(*lp)[i].Store(e)
}

// adopt puts e, known and not held by a Tx, in its slot if the slot is
// free: a document published before the table grew finds a slot again,
// while two keys that share one do not take it from each other at every
// read. Called with writer.mu held.
func (h *hints) adopt(e *docEntry) {
	slots := *h.slots.Load()
	i := h.index(e.key, len(slots))
	if len(e.key) <= hintKeyMax {
		if slots[i].seq.Load()>>1&0x7f == 0 {
			h.publish(e)
		}
		return
	}
	if lp := h.long.Load(); lp == nil || (*lp)[i].Load() == nil {
		h.publish(e)
	}
}

// unpublish marks e unknown (a Tx takes its lock), and its slot if it
// holds e's key. Called with writer.mu held.
func (h *hints) unpublish(e *docEntry) {
	if e.pub.Load() == 0 {
		return
	}
	e.pub.Store(0)
	if len(e.key) > hintKeyMax {
		return // the long table reads e.pub
	}
	slots := *h.slots.Load()
	s := &slots[h.index(e.key, len(slots))]
	if s.holds(e.key) {
		s.write(e.key, 0)
	}
}

// retire marks e, dropped from a generation of the cache, unknown and
// frees its slot. Called with writer.mu held.
func (h *hints) retire(e *docEntry) {
	e.pub.Store(0)
	slots := *h.slots.Load()
	i := h.index(e.key, len(slots))
	if len(e.key) <= hintKeyMax {
		if s := &slots[i]; s.holds(e.key) {
			s.write("", 0)
		}
		return
	}
	if lp := h.long.Load(); lp != nil {
		(*lp)[i].CompareAndSwap(e, nil)
	}
}

// write sets the slot to key and pub. Called with writer.mu held: one
// writer at a time.
func (s *hintSlot) write(key string, pub uint64) {
	q := s.seq.Load()
	s.seq.Store(q | 1)
	s.pub.Store(pub)
	for w := range hintKeyWords {
		s.key[w].Store(keyWord(key, w))
	}
	s.seq.Store((q>>8+1)<<8 | uint64(len(key))<<1)
}

// holds reports whether the slot holds key. Called with writer.mu held.
func (s *hintSlot) holds(key string) bool {
	if int(s.seq.Load()>>1&0x7f) != len(key) {
		return false
	}
	for w := range hintKeyWords {
		if s.key[w].Load() != keyWord(key, w) {
			return false
		}
	}
	return true
}

// keyWord is the w-th little-endian word of key, padded with zeros.
func keyWord[S string | []byte](key S, w int) uint64 {
	i := 8 * w
	if i+8 <= len(key) {
		k := key[i : i+8]
		return uint64(k[0]) | uint64(k[1])<<8 | uint64(k[2])<<16 | uint64(k[3])<<24 |
			uint64(k[4])<<32 | uint64(k[5])<<40 | uint64(k[6])<<48 | uint64(k[7])<<56
	}
	var x uint64
	for j := len(key) - 1; j >= i; j-- {
		x = x<<8 | uint64(key[j])
	}
	return x
}

// lookup returns the published latest version of the document under
// prefix: found reports that the table held its key, ok that the version
// is known.
func (h *hints) lookup(prefix []byte) (latest int64, deleted, found, ok bool) {
	slots := *h.slots.Load()
	i := maphash.Bytes(h.seed, prefix) & uint64(len(slots)-1)
	var p uint64
	if len(prefix) <= hintKeyMax {
		s := &slots[i]
		q := s.seq.Load()
		if q&1 != 0 || int(q>>1&0x7f) != len(prefix) {
			return 0, false, false, false
		}
		p = s.pub.Load()
		for w := range (len(prefix) + 7) / 8 {
			if s.key[w].Load() != keyWord(prefix, w) {
				return 0, false, false, false
			}
		}
		if s.seq.Load() != q {
			return 0, false, false, false
		}
	} else {
		lp := h.long.Load()
		if lp == nil || len(*lp) != len(slots) {
			return 0, false, false, false
		}
		e := (*lp)[i].Load()
		if e == nil || e.key != string(prefix) {
			return 0, false, false, false
		}
		p = e.pub.Load()
	}
	if p == 0 {
		return 0, false, true, false
	}
	return int64(p >> pubShift), p&pubDeleted != 0, true, true
}
