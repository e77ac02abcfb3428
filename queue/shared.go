package queue

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/queuefmt"
)

// A queue on a shared engine (engine.Caps.Shared: etcd, SQL), where
// several processes write the same keys: the package doc, "Shared
// engines", says what each write requires and why. Memory holds hints only
// (sharedMem), each checked against the store before it is trusted, or
// safe when wrong: this process's head (every number below it consumed),
// the runs of consumed numbers above it, and the leases this process holds
// with the bytes it last wrote.

// headLag is how far a process's head may run past the stored head before
// a consumer writes it (a hint: a reader starting at the stored head walks
// at most this many consumed numbers, which a remote engine has deleted).
const headLag = 1024

// gapMin is the shortest run of consumed numbers a scan remembers and
// seeks over: a seek costs a round trip on a remote engine, and walking a
// short run costs less.
const gapMin = 64

// maxGaps bounds the runs remembered; past it they are forgotten (scans
// then walk them once more).
const maxGaps = 4096

// span is a run [lo, hi) of consumed sequence numbers.
type span struct{ lo, hi int64 }

// sharedMem is the memory of a queue on a shared engine: hints only. It is
// guarded by core.mu.
type sharedMem struct {
	skew      time.Duration   // Caps.ClockSkew
	poll      time.Duration   // Caps.PollInterval, when the engine cannot watch
	watcher   engine.Watcher  // nil: poll
	maxOps    int             // Caps.MaxBatchOps, 0: none
	maxBytes  int             // Caps.MaxBatchBytes, 0: none
	maxValue  int             // the largest encoded value an enqueue takes
	head      int64           // every number below is consumed; 0: unknown yet
	stored    int64           // the head the state key held when last seen
	advancing bool            // an advanceHead is under way
	held      map[int64]*held // leases this process holds, by sequence number
	gaps      []span          // consumed runs above head, sorted, disjoint
	hint      stateHint       // the state key as last committed (shared_tail.go)
	blocked   []blockedRun    // runs of items behind their groups' windows (groups.go)

	// The control key as this process last read or wrote it
	// (control_shared.go): a hint, required at commit by deliveries.
	ctl      control
	ctlRaw   []byte // its stored bytes; nil: absent
	ctlKnown bool   // ctl was read
	maxCap   int    // the largest cap whose counted leases fit a batch

	// Deliveries side by side (shared_claims.go).
	claimed map[int64]struct{} // items picked by deliveries in flight
	gen     uint64             // numbers this process's writes to items
	wrote   map[int64]uint64   // item -> number of its last write here, while a read older than it runs
	log     []seqGen           // wrote's entries, oldest first
	reads   map[uint64]int     // deliveries' reads in flight, by the number they began at
	spread  int                // batches a delivery may start in; 0 or 1: at the head
}

// held is a lease this process holds on a message of a shared queue, as of
// its last write.
type held struct {
	seq      int64
	lease    uint64    // the token in the ID
	raw      []byte    // what the item holds after this process's last write
	deadline time.Time // when the lease ends (by this process's clock)
	attempts int       // deliveries, this one included
	busy     bool      // a write about it is under way
	suspect  bool      // a write conditioned on raw did not commit: read before trusting raw
	// alt is what an Extend whose outcome is unknown would have written
	// (and altDeadline its lease's end): if the item holds it, the
	// Extend was applied and the lease is still this process's.
	alt         []byte
	altDeadline time.Time
}

func newSharedMem(caps engine.Caps, s engine.Store) *sharedMem {
	m := &sharedMem{skew: max(caps.ClockSkew, 0), maxOps: caps.MaxBatchOps, maxBytes: caps.MaxBatchBytes, held: map[int64]*held{}}
	if w, ok := s.(engine.Watcher); ok && caps.Watch {
		m.watcher = w
	}
	m.poll = caps.PollInterval
	if m.poll <= 0 {
		m.poll = time.Second
	}
	// A message's bytes travel twice in the batch that leases it: as the
	// condition and as the new value. An enqueue refuses a value that
	// could never be delivered.
	m.maxValue = MaxValueSize
	if caps.MaxBatchBytes > 0 {
		m.maxValue = min(m.maxValue, caps.MaxBatchBytes/2-batchSlack)
	}
	if caps.MaxValueSize > 0 {
		m.maxValue = min(m.maxValue, caps.MaxValueSize-batchSlack)
	}
	m.maxValue = max(m.maxValue, 0)
	// A capped delivery carries the control key's leases twice (the
	// condition, the new value): at most a quarter of a batch.
	m.maxCap = MaxInFlightLimit
	if caps.MaxBatchBytes > 0 {
		m.maxCap = min(m.maxCap, (caps.MaxBatchBytes/4-ctlSlack)/queuefmt.MaxLeaseSize)
	}
	if caps.MaxValueSize > 0 {
		m.maxCap = min(m.maxCap, (caps.MaxValueSize-ctlSlack)/queuefmt.MaxLeaseSize)
	}
	m.maxCap = max(m.maxCap, 1)
	return m
}

// ctlSlack is what a control value holds beside its leases, at most, and
// some margin.
const ctlSlack = 64

// batchSlack is what a message's key and header add to it in a batch, at
// most (a 256-byte name, escaped, a number, a header), and some margin for
// what the engine counts.
const batchSlack = 2*MaxNameSize + 64

// visibleAt is when a stored item becomes visible, in Unix ns: a lease's
// end plus the clock-skew margin, or a delay's end.
func (m *sharedMem) visibleAt(h header, leased bool) int64 {
	if !leased {
		return h.at
	}
	if h.at > math.MaxInt64-int64(m.skew) {
		return math.MaxInt64
	}
	return h.at + int64(m.skew)
}

// sharedAllocKey keys a Tx's sequence-number allocation for one queue.
type sharedAllocKey struct{ c *core }

// sharedAlloc is what one Tx allocates in one shared queue: the state key
// it read (and requires at commit), the tail it moves.
type sharedAlloc struct {
	c      *core
	tx     *link.Tx
	st     state
	loaded bool
	hinted bool // st came from the tail hint (shared_tail.go), not a read
}

// allocShared takes n sequence numbers for tx in a shared queue. The first
// call in a Tx reads the state key, or takes the tail hint instead
// (shared_tail.go), and adds the condition that the key holds what was
// read; the state key is written once, when the Tx prepares.
func (c *core) allocShared(tx *link.Tx, n int) (int64, error) {
	a := tx.State(sharedAllocKey{c}, func() any { return &sharedAlloc{c: c, tx: tx} }).(*sharedAlloc)
	if !a.loaded {
		if raw, st, ok := c.takeStateHint(); ok {
			if err := tx.Batch.Require(engine.Equals(c.k.state, raw)); err != nil {
				return 0, err
			}
			a.st, a.hinted = st, true
			tx.OnAbort(c.missedStateHint)
			return a.loadedThen(n)
		}
		v, err := c.store.Get(c.k.state)
		switch {
		case err == nil:
			st, err := parseState(v)
			if err != nil {
				return 0, fmt.Errorf("state key %x: %w", c.k.state, err)
			}
			if err := tx.Batch.Require(engine.Equals(c.k.state, v)); err != nil {
				return 0, err
			}
			a.st = state{head: max(st.head, 1), tail: max(st.tail, st.head, 1)}
		case errors.Is(err, engine.ErrNotFound):
			tail, err := c.tailFromKeys()
			if err != nil {
				return 0, err
			}
			if err := tx.Batch.Require(engine.Absent(c.k.state)); err != nil {
				return 0, err
			}
			a.st = state{head: 1, tail: tail}
		default:
			return 0, err
		}
		return a.loadedThen(n)
	}
	return a.take(n)
}

// loadedThen finishes the first allocation of a Tx, whose state a holds:
// the state key is written when the Tx prepares.
func (a *sharedAlloc) loadedThen(n int) (int64, error) {
	a.loaded = true
	a.c.sawStoredHead(a.st.head)
	a.tx.OnPrepare(a.prepare)
	return a.take(n)
}

// take takes n sequence numbers from the tail a holds.
func (a *sharedAlloc) take(n int) (int64, error) {
	c := a.c
	if a.st.tail+int64(n) >= maxSeq {
		return 0, fmt.Errorf("%w: queue %q: sequence numbers exhausted", tipkv.ErrInvalid, c.name)
	}
	start := a.st.tail
	a.st.tail += int64(n)
	return start, nil
}

// prepare writes the state: the tail past every number the Tx took, and
// the head at the higher of the stored one and this process's.
func (a *sharedAlloc) prepare() error {
	st := a.st
	st.head = min(max(st.head, a.c.headHint()), st.tail)
	raw := appendState(nil, st)
	hit := a.hinted
	a.tx.OnCommit(func() { a.c.keepStateHint(raw, st, hit) })
	return a.tx.Batch.Set(a.c.k.state, raw)
}

// tailFromKeys is the first sequence number of a queue whose state key is
// missing: past its items and dead letters (none on a shared engine,
// where every enqueue writes the state key; a store written otherwise
// may have some).
func (c *core) tailFromKeys() (int64, error) {
	tail := int64(1)
	for _, r := range [][2][]byte{{c.k.itemPrefix, c.k.itemEnd}, {c.k.deadPrefix, c.k.deadEnd}} {
		it, err := c.store.NewIter(r[0], r[1])
		if err != nil {
			return 0, err
		}
		if it.Last() {
			seq, err := seqOf(r[0], it.Key())
			if err != nil {
				_ = it.Close()
				return 0, err
			}
			tail = max(tail, seq+1)
		}
		if err := closeIter(it); err != nil {
			return 0, err
		}
	}
	return tail, nil
}

// headHint is this process's head of the queue: every number below it is
// consumed.
func (c *core) headHint() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sm.head
}

// sawStoredHead records the head the state key held.
func (c *core) sawStoredHead(h int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sm.stored = max(c.sm.stored, h)
	c.sm.head = max(c.sm.head, h)
}

// raiseHead records that every number below h is consumed, and forgets
// the leases on them (another process consumed them after they lapsed).
func (c *core) raiseHead(h int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h <= c.sm.head {
		return
	}
	c.sm.head = h
	for seq, x := range c.sm.held {
		if seq < h && !x.busy {
			delete(c.sm.held, seq)
		}
	}
	i := 0
	for i < len(c.sm.gaps) && c.sm.gaps[i].hi <= h {
		i++
	}
	c.sm.gaps = c.sm.gaps[i:]
}

// consumedOwn records that this process's commit consumed the numbers ss
// (sorted): the head moves past those of them that begin at it.
func (c *core) consumedOwn(ss []int64) {
	c.mu.Lock()
	h := c.sm.head
	c.mu.Unlock()
	if h == 0 {
		return
	}
	i := sort.Search(len(ss), func(i int) bool { return ss[i] >= h })
	for i < len(ss) && ss[i] == h {
		h++
		i++
	}
	c.raiseHead(h)
}

// sawGap records that every number in [lo, hi) is consumed.
func (c *core) sawGap(lo, hi int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hi-lo < gapMin || hi <= c.sm.head {
		return
	}
	gs := c.sm.gaps
	// The runs that touch [lo, hi) merge with it.
	i := sort.Search(len(gs), func(i int) bool { return gs[i].hi >= lo })
	j := i
	for j < len(gs) && gs[j].lo <= hi {
		lo, hi = min(lo, gs[j].lo), max(hi, gs[j].hi)
		j++
	}
	if i == j && len(gs) >= maxGaps {
		c.sm.gaps = nil
		return
	}
	c.sm.gaps = slices.Replace(gs, i, j, span{lo, hi})
}

// gapAt returns the end of the consumed run that holds seq, or 0.
func (c *core) gapAt(seq int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := c.sm.gaps
	i := sort.Search(len(gs), func(i int) bool { return gs[i].hi > seq })
	if i < len(gs) && gs[i].lo <= seq {
		return gs[i].hi
	}
	return 0
}

// scanFrom is where a scan starts: this process's head, read from the
// state key the first time.
func (c *core) scanFrom() (int64, error) {
	if h := c.headHint(); h > 0 {
		return h, nil
	}
	v, err := c.store.Get(c.k.state)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return 1, nil
	case err != nil:
		return 0, err
	}
	st, err := parseState(v)
	if err != nil {
		return 0, fmt.Errorf("state key %x: %w", c.k.state, err)
	}
	c.sawStoredHead(max(st.head, 1))
	return max(st.head, 1), nil
}

// scan reads the items of a shared queue from this process's head on,
// oldest first, calling f with each (v is valid only during the call)
// until f returns false. n is how many items the caller expects to read,
// a hint for the engine. The first item found raises the head; runs of
// consumed numbers are remembered, and seeked over.
func (c *core) scan(n int, f func(seq int64, v []byte) (bool, error)) error {
	return c.scanJumping(n, f, nil)
}

// scanJumping is scan, with jump asked after each item f goes on from:
// a sequence number to go on at (past items the caller knows it can pass
// over), or 0 for the next.
func (c *core) scanJumping(n int, f func(seq int64, v []byte) (bool, error), jump func() int64) error {
	from, err := c.scanFrom()
	if err != nil {
		return err
	}
	it, err := engine.NewIterN(c.store, c.k.item(nil, from), c.k.itemEnd, min(n, 1024))
	if err != nil {
		return err
	}
	first, prev := true, from-1 // prev: the last number read
	var key []byte
	ok := it.First()
	for ok {
		seq, err := seqOf(c.k.itemPrefix, it.Key())
		if err != nil {
			_ = it.Close()
			return err
		}
		if first {
			first = false
			c.raiseHead(seq)
		} else if seq-prev > gapMin {
			// Missing between two read in one view: consumed.
			c.sawGap(prev+1, seq)
		}
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return err
		}
		more, err := f(seq, v)
		if err != nil {
			_ = it.Close()
			return err
		}
		if !more {
			break
		}
		prev = seq
		if to := jumpTo(jump); to > seq+1 {
			key = c.k.item(key[:0], to)
			ok = it.SeekGE(key)
			prev = to - 1
		} else if end := c.gapAt(seq + 1); end > 0 {
			key = c.k.item(key[:0], end)
			ok = it.SeekGE(key)
		} else {
			ok = it.Next()
		}
	}
	return closeIter(it)
}

func jumpTo(jump func() int64) int64 {
	if jump == nil {
		return 0
	}
	return jump()
}

// advanceHead writes this process's head to the state key when it has run
// headLag past the stored one: a hint, written on its own with the
// condition that the state key holds what was read, and given up if
// anything fails (an enqueue that wrote meanwhile will have written it).
func (c *core) advanceHead() {
	c.mu.Lock()
	if c.sm.advancing || c.sm.head-c.sm.stored < headLag || c.closed {
		c.mu.Unlock()
		return
	}
	c.sm.advancing = true
	head := c.sm.head
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.sm.advancing = false
		c.mu.Unlock()
	}()
	v, err := c.store.Get(c.k.state)
	if err != nil {
		return
	}
	st, err := parseState(v)
	if err != nil {
		return
	}
	c.sawStoredHead(st.head)
	if head-st.head < headLag || head > st.tail {
		return
	}
	b := c.store.NewBatch()
	defer b.Close()
	next := state{head: head, tail: st.tail}
	raw := appendState(nil, next)
	if b.Require(engine.Equals(c.k.state, v)) != nil || b.Set(c.k.state, raw) != nil {
		return
	}
	if b.Apply(false) == nil && b.Wait() == nil {
		c.sawStoredHead(head)
		c.keepStateHint(raw, next, false)
	}
}

// parseItem splits a stored item, leased or not, into its header and
// payload (which aliases v).
func parseItem(v []byte) (header, bool, []byte, error) {
	h, leased, payload, err := queuefmt.ParseItem(v)
	return header{attempts: h.Attempts, enqueued: h.Enqueued, at: h.At, headers: h.Headers, meta: h.Meta, group: h.Group}, leased, payload, err
}

// itemValue is the stored bytes of an item: leased (until h.at) or not.
func itemValue(h header, leased bool, payload []byte) []byte {
	tag := byte(itemFormat)
	if leased {
		tag = leasedFormat
	}
	v := appendHeader(make([]byte, 0, 1+4*10+len(h.headers)+len(payload)), tag, h)
	return append(v, payload...)
}

// statsShared reads a shared queue's counters from the store: the state
// key for the tail, and every live item for the rest.
func (c *core) statsShared() (Stats, error) {
	if err := c.checkOpen(); err != nil {
		return Stats{}, err
	}
	now, err := c.now()
	if err != nil {
		return Stats{}, err
	}
	nowNS := now.UnixNano()
	var st Stats
	v, err := c.store.Get(c.k.state)
	switch {
	case err == nil:
		s, err := parseState(v)
		if err != nil {
			return Stats{}, fmt.Errorf("state key %x: %w", c.k.state, err)
		}
		st.Tail = max(s.tail, s.head, 1)
	case errors.Is(err, engine.ErrNotFound):
		if st.Tail, err = c.tailFromKeys(); err != nil {
			return Stats{}, err
		}
	default:
		return Stats{}, err
	}
	st.Head = st.Tail
	err = c.scan(1024, func(seq int64, v []byte) (bool, error) {
		if st.Len == 0 {
			st.Head = seq
		}
		st.Len++
		h, leased, _, err := parseItem(v)
		switch {
		case err != nil:
		case leased && c.sm.visibleAt(h, true) > nowNS:
			st.Leased++
		case !leased && h.at > nowNS:
			st.Delayed++
		}
		return true, nil
	})
	if err != nil {
		return Stats{}, err
	}
	if st.DeadLetters, err = c.countDead(); err != nil {
		return Stats{}, err
	}
	ct, _, err := c.loadControlShared()
	if err != nil {
		return Stats{}, err
	}
	st.Paused, st.MaxInFlight = ct.paused, ct.max
	return st, nil
}

// countDead counts the queue's dead letters in the store, reading their
// keys.
func (c *core) countDead() (n int, err error) {
	it, err := engine.NewIterN(c.store, c.k.deadPrefix, c.k.deadEnd, 1024)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Error()
}

// checkOpen returns ErrClosed once the DB closed.
func (c *core) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return tipkv.ErrClosed
	}
	return nil
}

// claim checks that ids name leases this process holds on a shared queue,
// and marks them busy. A lease whose last write did not commit is read
// again: if its item no longer holds what this process wrote, the lease is
// lost.
func (c *core) claim(ids []ID) ([]*held, error) {
	c.mu.Lock()
	hs, suspect, err := c.claimLocked(ids)
	c.mu.Unlock()
	if err != nil || !suspect {
		return hs, err
	}
	for _, h := range hs {
		c.mu.Lock()
		check := h.suspect
		c.mu.Unlock()
		if !check {
			continue
		}
		v, err := c.store.Get(c.k.item(nil, h.seq))
		c.mu.Lock()
		switch {
		case err == nil && bytes.Equal(v, h.raw):
			h.suspect, h.alt = false, nil
		case err == nil && h.alt != nil && bytes.Equal(v, h.alt):
			h.raw, h.deadline = h.alt, h.altDeadline
			h.suspect, h.alt = false, nil
		case err == nil || errors.Is(err, engine.ErrNotFound):
			c.forget(h)
			err = fmt.Errorf("queue %q: message %d (id %s): %w", c.name, h.seq, ID{seq: h.seq, lease: h.lease}, ErrLeaseLost)
		}
		if err != nil {
			for _, h := range hs {
				h.busy = false
			}
			c.mu.Unlock()
			return nil, err
		}
		c.mu.Unlock()
	}
	return hs, nil
}

// claimLocked is claim's work under mu. suspect says some lease must be
// read again.
func (c *core) claimLocked(ids []ID) (hs []*held, suspect bool, err error) {
	if c.closed {
		return nil, false, tipkv.ErrClosed
	}
	hs = make([]*held, 0, len(ids))
	defer func() {
		if err != nil {
			for _, h := range hs {
				h.busy = false
			}
			hs = nil
		}
	}()
	for _, id := range ids {
		if id.lease == 0 {
			return hs, false, fmt.Errorf("%w: queue %q: message %d: zero lease (messages from Peek and Pop have no lease)", tipkv.ErrInvalid, c.name, id.seq)
		}
		h := c.sm.held[id.seq]
		if h == nil || h.lease != id.lease {
			return hs, false, fmt.Errorf("queue %q: message %d (id %s): %w", c.name, id.seq, id, ErrLeaseLost)
		}
		if h.busy {
			for _, o := range hs {
				if o == h {
					return hs, false, fmt.Errorf("%w: message id %s given twice", tipkv.ErrInvalid, id)
				}
			}
			return hs, false, fmt.Errorf("queue %q: message %d (id %s): %w", c.name, id.seq, id, ErrLeaseLost)
		}
		h.busy = true
		suspect = suspect || h.suspect
		hs = append(hs, h)
	}
	return hs, suspect, nil
}

// unclaim ends claims whose write did not commit: the item may or may not
// hold what it held before, so the next use reads it first.
func (c *core) unclaim(hs []*held) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		h.busy, h.suspect = false, true
	}
}

// unclaimExtend ends the claim of an Extend that did not commit: the item
// may hold what it held before or what the Extend wrote (val, for a lease
// until deadline); the next use reads it to find out.
func (c *core) unclaimExtend(h *held, val []byte, deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.busy, h.suspect = false, true
	h.alt, h.altDeadline = val, deadline
}

// forget drops a lease. The caller holds mu.
func (c *core) forget(h *held) {
	if c.sm.held[h.seq] == h {
		delete(c.sm.held, h.seq)
	}
}
