package queue

// The tail hint of a shared queue. Every enqueue on a shared engine takes
// its sequence numbers from the queue's state key and requires at commit
// that the key still holds what it took them from. Reading the key first
// costs a round trip to the engine; a process that enqueues again usually
// knows what the key holds, because it wrote it. So a first allocation in
// a Tx starts from the bytes this process last saw committed, without a
// read, and the commit's condition checks them as it would check a read's:
// a stale hint fails the condition, the write runs again (reading), and no
// number is ever taken twice.
//
// A stale hint costs a failed commit and, on an engine with locks, the
// queue's writer lock for the retry: more than the read it saves. It is
// stale when another process (or a consumer moving the head) wrote the
// key since; a queue with several producing processes would miss often.
// So each miss makes the next allocations read first, twice as many after
// each miss in a row (up to maxHintSkip), and a hit halves the count: a
// lone producer never reads, and producers that take turns read as they
// did before, with one failed commit in maxHintSkip allocations.

// maxHintSkip bounds the allocations that read the state key after misses
// in a row before the hint is tried again.
const maxHintSkip = 256

// stateHint is the state key as this process last saw it committed. It is
// guarded by core.mu.
type stateHint struct {
	raw    []byte // the key's bytes; nil: none to offer (unknown, or taken)
	st     state  // what raw holds (kept when raw is taken, to order the next)
	skip   int    // allocations left that read the key before a hint is offered
	after  int    // skip after the next miss
	misses int    // allocations whose hint was stale, for tests
}

// takeStateHint returns the state key's bytes as last seen committed, and
// what they hold, for one allocation to require instead of reading them.
// The hint is taken: a second allocation in flight reads the key.
func (c *core) takeStateHint() ([]byte, state, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &c.sm.hint
	if h.skip > 0 {
		h.skip--
		return nil, state{}, false
	}
	if h.raw == nil {
		return nil, state{}, false
	}
	raw := h.raw
	h.raw = nil
	return raw, h.st, true
}

// keepStateHint records that the state key held raw (which holds st) at a
// commit or a read: the hint, unless it already holds a later state (the
// state key's head and tail only grow, so the later of two is the one
// with the higher tail, then head). A hit (hit: the allocation used the
// hint) halves the skip of the next miss.
func (c *core) keepStateHint(raw []byte, st state, hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &c.sm.hint
	if hit {
		h.after /= 2
	}
	if st.tail < h.st.tail || (st.tail == h.st.tail && st.head < h.st.head) {
		return
	}
	h.raw, h.st = raw, st
}

// missedStateHint records that a Tx which used the hint did not commit:
// the next allocations read the key.
func (c *core) missedStateHint() {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &c.sm.hint
	h.misses++
	h.after = min(max(2*h.after, 1), maxHintSkip)
	h.skip = h.after
}
