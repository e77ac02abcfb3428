package queue

import (
	"math/rand/v2"
	"slices"
)

// Consumers side by side on a shared queue: goroutines of one process
// (one handle is safe for concurrent use) and processes.
//
// Goroutines of one process never race each other for a message:
//
//   - Claims. The items a delivery in flight has picked are claimed
//     (sharedMem.claimed) until its write has committed or failed; every
//     other delivery of the process passes over them, as SKIP LOCKED
//     passes over locked rows.
//   - Reads older than this process's writes. A read views the store as
//     of some moment, no later than its first page (engine.Reader). A
//     read that began before this process committed a write to an item
//     may show the item as it was: unleased, though this process has just
//     leased it, or leased by an earlier lease of ours. Acting on it would
//     fail its condition (a conflict with oneself) and, worse, the old
//     bytes would look like another process's change and drop the fresh
//     lease (Ack then failing with ErrLeaseLost for a message nobody else
//     was given). So every write this process commits to an item is
//     numbered (sharedMem.gen, counted after the commit returned), every
//     read remembers the number current when it began, and a read passes
//     over an item this process wrote at a higher number. The numbers are
//     kept only while a read that began before them is in flight.
//
// Processes cannot see each other's claims; they meet at commit, where one
// wins and the others find a failed condition. A process that lost a race
// for the head spreads out: its next deliveries start at a random offset
// into the visible messages (a whole number of batches, up to spread
// batches in), and the spread doubles with each loss and shrinks by one
// with each delivery that won at once. One consumer alone never loses, so
// it reads oldest first.

// maxSpread bounds sharedMem.spread, and maxSkip the messages a delivery
// passes over to reach its offset.
const (
	maxSpread = 64
	maxSkip   = 2048
)

// seqGen is an entry of sharedMem.log: item seq written at gen.
type seqGen struct {
	seq int64
	gen uint64
}

// beginRead registers a read of the queue's items that a delivery will act
// on, and returns the write number it began at.
func (c *core) beginRead() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	since := c.sm.gen
	if c.sm.reads == nil {
		c.sm.reads = map[uint64]int{}
	}
	c.sm.reads[since]++
	return since
}

// endRead ends a read that beginRead registered, and forgets the writes
// that no read in flight began before.
func (c *core) endRead(since uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sm.reads[since]--; c.sm.reads[since] <= 0 {
		delete(c.sm.reads, since)
	}
	oldest, any := uint64(0), false
	for g := range c.sm.reads {
		if !any || g < oldest {
			oldest, any = g, true
		}
	}
	i := 0
	for i < len(c.sm.log) && (!any || c.sm.log[i].gen <= oldest) {
		e := c.sm.log[i]
		if c.sm.wrote[e.seq] == e.gen {
			delete(c.sm.wrote, e.seq)
		}
		i++
	}
	c.sm.log = c.sm.log[i:]
	if len(c.sm.log) == 0 {
		c.sm.log = c.sm.log[:0:0]
	}
}

// wroteLocked numbers a write of this process to the items seqs, which
// has committed (or whose outcome is unknown): reads in flight pass over
// them. The caller holds mu.
func (c *core) wroteLocked(seqs ...int64) {
	c.sm.gen++
	if len(c.sm.reads) == 0 {
		return // a read that begins later sees the write
	}
	if c.sm.wrote == nil {
		c.sm.wrote = map[int64]uint64{}
	}
	for _, s := range seqs {
		c.sm.wrote[s] = c.sm.gen
		c.sm.log = append(c.sm.log, seqGen{s, c.sm.gen})
	}
}

// staleLocked reports whether a read that began at since must pass over
// the item at seq: a delivery of this process has claimed it, or this
// process wrote it after the read began. The caller holds mu.
func (c *core) staleLocked(seq int64, since uint64) bool {
	if _, ok := c.sm.claimed[seq]; ok {
		return true
	}
	g, ok := c.sm.wrote[seq]
	return ok && g > since
}

// claimPicks claims the items ps for a delivery, leaving out those that
// another delivery of this process claimed or wrote since the read began
// at since, or whose lease is being written. It returns the picks claimed.
func (c *core) claimPicks(ps []*picked, since uint64) []*picked {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sm.claimed == nil {
		c.sm.claimed = map[int64]struct{}{}
	}
	return slices.DeleteFunc(ps, func(p *picked) bool {
		if c.staleLocked(p.seq, since) {
			return true
		}
		if h := c.sm.held[p.seq]; h != nil && h.busy {
			return true
		}
		c.sm.claimed[p.seq] = struct{}{}
		return false
	})
}

// dropClaims ends the claims of ps. written says the delivery's write was
// sent and may have committed: reads in flight then pass over the items.
// A claim dropped with nothing written wakes the Waits of this process,
// which passed over the claimed items.
func (c *core) dropClaims(ps []*picked, written bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropClaimsLocked(ps, written)
}

// dropClaimsLocked is dropClaims; the caller holds mu.
func (c *core) dropClaimsLocked(ps []*picked, written bool) {
	if len(ps) == 0 {
		return
	}
	seqs := make([]int64, len(ps))
	for i, p := range ps {
		delete(c.sm.claimed, p.seq)
		seqs[i] = p.seq
	}
	if written {
		c.wroteLocked(seqs...)
	} else {
		c.notify()
	}
}

// claimed reports whether a delivery of this process has claimed the item
// at seq.
func (c *core) claimed(seq int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sm.claimed[seq]
	return ok
}

// offset is how many deliverable messages a delivery of up to limit
// passes over first: 0 until this process has lost a race for the head,
// then a random whole number of batches below the spread.
func (c *core) offset(limit int) int {
	c.mu.Lock()
	spread := max(c.sm.spread, 1)
	c.mu.Unlock()
	if spread == 1 {
		return 0
	}
	return min(rand.IntN(spread)*limit, maxSkip)
}

// raced records the outcome of a delivery's write: lost says another
// process changed a picked item first (the spread doubles), otherwise the
// write won at its first try (the spread shrinks by one).
func (c *core) raced(lost bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lost {
		c.sm.spread = min(max(c.sm.spread, 1)*2, maxSpread)
	} else if c.sm.spread > 1 {
		c.sm.spread--
	}
}
