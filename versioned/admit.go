package versioned

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// admission decides which reads of a latest version teach it to the
// version cache (writer.learn): a document's second miss, not its first.
// A read that learns pays the writer's mutex, an entry made (and, with
// the cache full, another forgotten) and a slot of the hints written;
// when reads are spread over more documents than the cache holds, most
// of them pay that and the entry is forgotten before it is used
// (BenchmarkLatestCold: 9-14% of a cold read). A document read again
// soon is learnt one read later than before; one read once is not
// learnt at all.
//
// Recent misses are a direct-mapped table of 32-bit fingerprints, one
// per slot, written without locks: a miss whose fingerprint is in its
// slot is a second miss; otherwise it takes the slot. A fingerprint lives
// until another miss takes its slot, so a document's second miss is
// recognized when fewer than about len(slots) misses fell between the two
// (e^-1 of the time at len(slots), 90% at a tenth of it). Two documents
// with one fingerprint in one slot make the second learn early; learning
// is always correct (writer.learn checks the epoch), so a wrong answer
// here costs a learn or a seek, never a wrong version.
type admission struct {
	seed  maphash.Seed
	slots []atomic.Uint32
}

// admissionMin is the fewest slots: 4 KiB.
const admissionMin = 1 << 10

// newAdmission returns a table of about n slots (a power of two, at least
// admissionMin): 4 bytes a slot.
func newAdmission(n int) *admission {
	n = max(n, admissionMin)
	return &admission{seed: maphash.MakeSeed(), slots: make([]atomic.Uint32, 1<<bits.Len(uint(n-1)))}
}

// second reports whether the document under prefix missed recently; if
// not, it records this miss. Safe for concurrent use.
func (a *admission) second(prefix []byte) bool {
	h := maphash.Bytes(a.seed, prefix)
	s := &a.slots[h&uint64(len(a.slots)-1)]
	fp := uint32(h>>32) | 1 // never 0, an empty slot
	if s.Load() == fp {
		return true
	}
	s.Store(fp)
	return false
}
