package queue

// Goroutines of one process delivering from one shared queue side by side
// (one handle is safe for concurrent use).
//
// A read views the store as of some moment, no later than its first page
// (engine.Reader). A read that began before this process committed a
// write to an item may show the item as it was: unleased, though this
// process has just leased it, or leased by an earlier lease of ours.
// Acting on it would fail its condition (a conflict with oneself) and,
// worse, the old bytes would look like another process's change and drop
// the fresh lease (Ack then failing with ErrLeaseLost for a message nobody
// else was given). So every write this process commits to an item is
// numbered (sharedMem.gen, counted after the commit returned), every read
// remembers the number current when it began, and a read passes over an
// item this process wrote at a higher number. The numbers are kept only
// while a read that began before them is in flight.

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
// the item at seq: this process wrote it after the read began. The caller
// holds mu.
func (c *core) staleLocked(seq int64, since uint64) bool {
	g, ok := c.sm.wrote[seq]
	return ok && g > since
}
