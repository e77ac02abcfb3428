package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// core is the in-memory state of one queue of one DB, shared by every
// Queue handle of that name (it lives in the DB's link.Registry). All its
// fields are guarded by mu; nothing holds mu across a commit.
//
// Sequence numbers fall into these ranges:
//
//	[1, head)            consumed and deleted
//	[head, cursor)       delivered at least once since load: each live one
//	                     has an entry in order (leased, ready again,
//	                     waiting for its visible-at time, or busy while a
//	                     write about it commits); the others are gone
//	[cursor, watermark)  committed, not yet looked at: fresh of them are
//	                     live, the rest are gaps (aborted enqueues)
//	[watermark, next)    allocated to enqueues; blocks says which have
//	                     committed or aborted, but some earlier one has not
//	                     finished, so none of them is visible yet
type core struct {
	db    *tipkv.DB
	ln    *link.DB // db's internals
	store engine.Store
	dq    *dbQueues
	// sm is non-nil on a shared engine (shared.go); then of the fields
	// below only mu, closed, closedCh, changed and sleepers are used.
	sm    *sharedMem
	clock func() time.Time // the DB's Options.Clock
	log   *slog.Logger     // the DB's Options.Logger; never nil
	name  string
	k     keys

	closeOnce sync.Once

	mu       sync.Mutex
	loaded   bool
	closed   bool
	closedCh chan struct{} // closed when the DB closes
	changed  chan struct{} // closed and replaced when a message may have become visible
	watched  bool          // changed was handed out since it was made
	sleepers int           // goroutines asleep in Wait

	next      int64
	watermark int64
	blocks    []*block
	cursor    int64
	fresh     int

	// order holds the entries of [head, cursor) by seq (they are added at
	// the cursor, which only moves forward); removed ones are dropped
	// lazily. Sequence numbers are dense, so entryAt finds most by their
	// distance from the first: no map to fill and empty per message.
	order    []*entry
	nremoved int // removed entries still in order

	ready    itemHeap // visible-again entries, by seq
	timers   itemHeap // leased and waiting entries, by deadline
	nready   int
	nleased  int
	nwaiting int
	// nslots counts the entries in flight: leased, or busy while a
	// Receive or an Ack of a leased message commits (entry.slot). The
	// cap in ctl bounds it.
	nslots int

	// ctl is the queue's control (pause, cap) as last applied to the
	// store or loaded from it. Only a Tx holding dq.stateMu changes it.
	ctl control

	deadBusy map[int64]bool // dead letters being requeued or discarded

	// groups holds the live entries of each message group, by seq, while
	// it has some; window is how many of a group's oldest live messages may be delivered
	// (Options.GroupWindow), and nblocked counts the entries behind their
	// group's window (see groups.go).
	groups      map[string]*group
	spareGroups []*group // emptied groups, for new ones
	window      int
	nblocked    int

	// last is the newest queue state applied to the store (or loaded from
	// it, with the count as load found it). Only a Tx holding dq.stateMu
	// changes it, and front and unstored with it.
	last state
	// A consume need not write the state key while last.run holds and
	// what it consumes extends the run of consumed messages
	// [last.head, front) at front, staying within knobs.Queue.StateEvery
	// of last.head (see extendsRun). unstored is how many messages the
	// batches applied since last consumed without writing it: the next
	// stored count takes them off.
	front, unstored int64
	// abortedTo is the end of the highest run of sequence numbers an
	// aborted enqueue left empty, or that load could not rule out: a
	// number at or past it is not a gap.
	abortedTo int64
	// enqueued counts the messages committed below the watermark since
	// load, less those found missing; lastEnqueued is its value when last
	// was computed. Their difference is what the next stored count adds.
	enqueued, lastEnqueued int64
	m                      meters
}

// block is one enqueue's run of sequence numbers [start, start+n).
// Blocks are recycled (blockPool) once resolve drops them, with their
// hooks bound once, so that an enqueue allocates none.
type block struct {
	start, n int64
	state    blockState
	c        *core
	// commitFn and abortFn are the enqueue's OnCommit and OnAbort hooks.
	commitFn, abortFn func()
}

var blockPool sync.Pool

func init() {
	blockPool.New = func() any {
		b := new(block)
		b.commitFn, b.abortFn = b.committed, b.aborted
		return b
	}
}

func (b *block) committed() { b.c.resolve(b, true) }
func (b *block) aborted()   { b.c.resolve(b, false) }

type blockState uint8

const (
	blockInFlight blockState = iota
	blockCommitted
	blockAborted
)

type entryState uint8

const (
	stBusy    entryState = iota // a write about the message is committing
	stLeased                    // delivered; deadline is when the lease ends
	stWaiting                   // invisible until deadline
	stReady                     // visible again
	stBlocked                   // behind its group's window; deadline: its visible-at time
)

// entry is a message in [head, cursor) that is still live.
type entry struct {
	seq      int64
	lease    uint64    // the lease token an Ack may still name; 0: none
	deadline time.Time // stLeased: lease end; stWaiting: visible-at
	gen      uint32    // bumped on every state change; older heap items are stale
	attempts uint32    // deliveries, as of the last one in this process
	state    entryState
	removed  bool
	gone     bool   // consumed by a batch that is applied, its commit maybe not yet returned
	mark     bool   // scratch, under mu
	slot     bool   // counted in core.nslots: leased, or busy while its lease is taken or acknowledged
	grp      *group // the message's group, nil for none
}

var leaseTokens atomic.Uint64

func init() {
	// Lease tokens are unique in the process, and start at a random point
	// so that an ID kept across a reopen does not name a new lease.
	leaseTokens.Store(rand.Uint64() >> 8)
}

func newLease() uint64 { return leaseTokens.Add(1) }

type registryKey struct{ name string }

// coreFor returns the loaded core of queue name in db.
func coreFor(db *tipkv.DB, name string) (*core, error) {
	ln, err := link.Of(db)
	if err != nil {
		return nil, err
	}
	reg, store, clock := &ln.Services, ln.Store, ln.Clock
	dq := dbQueuesOf(reg)
	c := reg.Get(registryKey{name}, func() any {
		var sm *sharedMem
		if caps := store.Caps(); caps.Shared {
			sm = newSharedMem(caps, store)
		}
		return &core{
			sm:       sm,
			db:       db,
			ln:       ln,
			store:    store,
			dq:       dq,
			clock:    clock,
			log:      ln.Logger,
			name:     name,
			k:        newKeys(name),
			closedCh: make(chan struct{}),
			changed:  make(chan struct{}),
			ready:    itemHeap{less: bySeq},
			timers:   itemHeap{less: byDeadline},
			deadBusy: make(map[int64]bool),
			groups:   make(map[string]*group),
		}
	}).(*core)
	c.closeOnce.Do(func() {
		reg.OnClose(c.close)
		c.register(reg)
	})
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// close ends the queue's use of its DB, when the DB closes: it stores
// the queue state first (see saveState), then wakes and refuses every
// call.
func (c *core) close() {
	c.saveState()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.closedCh)
	}
}

// saveState writes the queue-state key if messages were enqueued or
// consumed since it was last written, so that the next Open walks none of
// them. Enqueues do not write it, nor do most consumes (see "Head, tail
// and crash consistency" in the package doc), so after a crash instead of
// a Close, Open walks the messages enqueued since the key was last written
// and steps over the consumed ones, at most knobs.Queue.StateEvery. A
// failure is logged: the next Open does that, and counts right.
func (c *core) saveState() {
	if c.sm != nil {
		return // a shared engine's reads keep no count
	}
	c.mu.Lock()
	due := c.loaded && !c.closed && (c.watermark > c.last.countTo || c.next > c.last.tail || c.unstored > 0)
	c.mu.Unlock()
	if !due {
		return
	}
	err := link.Write(c.db, func(tx *link.Tx) error {
		c.writeState(tx, nil)
		return nil
	})
	if err != nil {
		c.log.LogAttrs(context.Background(), slog.LevelWarn, "tipkv: queue state not stored at close; the next Open walks the messages enqueued and consumed since",
			slog.String("queue", c.name), slog.Any("error", err))
	}
}

// load reads the queue-state key and finds the rest with a few seeks: the
// oldest live message, and the messages at or after the stored count's
// end, which it counts (none after a clean close, which stores the state;
// after a crash, those enqueued since the key was last written). Under a
// run state (tag 0x03) the seek to the oldest live message steps over the
// messages consumed since, at most knobs.Queue.StateEvery, and the count
// loses those below its end: they are exactly the numbers in [head, oldest
// live message) below countTo (see extendsRun). A
// state without a count (written before counts existed) makes it walk and
// count every live message from the head, once. It also counts the dead
// letters. It runs on the first Open of the queue in a DB.
func (c *core) load() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("queue %q: %w", c.name, tipkv.ErrClosed)
	}
	if c.loaded {
		return nil
	}
	if c.sm != nil {
		c.loaded = true // memory holds hints only; the reads find the rest
		return nil
	}
	st := state{head: 1, tail: 1}
	v, err := c.store.Get(c.k.state)
	switch {
	case err == nil:
		if st, err = parseState(v); err != nil {
			return fmt.Errorf("queue %q: state key %x: %w", c.name, c.k.state, err)
		}
		st.head, st.tail = max(st.head, 1), max(st.tail, 1)
	case !errors.Is(err, engine.ErrNotFound):
		return fmt.Errorf("queue %q: load: %w", c.name, err)
	}
	if !st.counted || st.countTo < st.head {
		st.count, st.countTo = 0, st.head // nothing counted yet: count all
	}
	ct, _, err := c.loadControl()
	if err != nil {
		return fmt.Errorf("queue %q: load: %w", c.name, err)
	}
	// Leases counted by a shared engine's processes (a store written
	// there) are not Pebble's: memory counts them, and the next write of
	// the key drops them.
	ct.counted, ct.leases = false, nil
	it, err := c.store.NewIter(c.k.item(nil, st.head), c.k.itemEnd)
	if err != nil {
		return fmt.Errorf("queue %q: load: %w", c.name, err)
	}
	var first, last int64
	count := st.count
	fail := func(err error) error {
		_ = it.Close()
		return fmt.Errorf("queue %q: load: %w", c.name, err)
	}
	if it.First() {
		if first, err = seqOf(c.k.itemPrefix, it.Key()); err != nil {
			return fail(err)
		}
	}
	for ok := first != 0 && it.SeekGE(c.k.item(nil, max(st.countTo, first))); ok; ok = it.Next() {
		seq, err := seqOf(c.k.itemPrefix, it.Key())
		if err != nil {
			return fail(err)
		}
		last = seq
		count++
	}
	if err := closeIter(it); err != nil {
		return fmt.Errorf("queue %q: load: %w", c.name, err)
	}
	tail := max(st.tail, st.head, st.countTo, last+1)
	// Sequence numbers are never reused while a dead letter holds one.
	dit, err := c.store.NewIter(c.k.deadPrefix, c.k.deadEnd)
	if err != nil {
		return fmt.Errorf("queue %q: load: %w", c.name, err)
	}
	var dead int64
	for ok := dit.First(); ok; ok = dit.Next() {
		seq, err := seqOf(c.k.deadPrefix, dit.Key())
		if err != nil {
			_ = dit.Close()
			return fmt.Errorf("queue %q: load: %w", c.name, err)
		}
		tail = max(tail, seq+1)
		dead++
	}
	if err := closeIter(dit); err != nil {
		return fmt.Errorf("queue %q: load: %w", c.name, err)
	}
	if st.run && first != 0 {
		// The run of messages consumed since the state was written.
		count = max(count-max(min(first, st.countTo)-st.head, 0), 0)
	}
	if first == 0 {
		count = 0 // a stored count that disagrees with an empty queue
	}
	c.next, c.watermark, c.cursor, c.fresh = tail, tail, tail, int(count)
	if first != 0 {
		c.cursor = first
	}
	// The run goes on from the oldest live message (a new one from the
	// stored head, if the queue is empty): the stored value still counts
	// what it held before, and the next Open finds both parts as one run.
	c.last = state{head: st.head, tail: st.tail, counted: true, run: st.run, count: count, countTo: tail}
	c.front, c.unstored = c.cursor, 0
	// Memory knows the gaps (aborted enqueues, messages consumed ahead of
	// older ones) only from here on. There are none between the first
	// message and the tail if the count covers every number there;
	// otherwise the numbers before the tail count as maybe gaps.
	c.abortedTo = 0
	if first != 0 && count != tail-first {
		c.abortedTo = tail
	}
	c.m.dead.Store(dead)
	c.ctl = ct
	c.loaded = true
	return nil
}

func closeIter(it engine.Iter) error {
	err := it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

// now reads the clock. A time that a message header cannot hold (see
// checkTime) is an error matching tipkv.ErrInvalid.
func (c *core) now() (time.Time, error) {
	now := c.clock()
	if err := checkTime(now); err != nil {
		return time.Time{}, fmt.Errorf("the clock reads %w", err)
	}
	return now, nil
}

// alloc takes n sequence numbers for an enqueue.
func (c *core) alloc(n int) (b *block, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, tipkv.ErrClosed
	}
	if c.next+int64(n) >= maxSeq {
		return nil, fmt.Errorf("%w: queue %q: sequence numbers exhausted", tipkv.ErrInvalid, c.name)
	}
	b = blockPool.Get().(*block)
	b.start, b.n, b.state, b.c = c.next, int64(n), blockInFlight, c
	c.next += int64(n)
	c.blocks = append(c.blocks, b)
	return b, nil
}

// resolve records that b's enqueue committed (its commit returned, the
// writes durable) or aborted, and moves the watermark over every leading
// block that has finished.
func (c *core) resolve(b *block, committed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if committed {
		b.state = blockCommitted
	} else {
		b.state = blockAborted
	}
	visible := false
	k := 0
	for k < len(c.blocks) && c.blocks[k].state != blockInFlight {
		f := c.blocks[k]
		if f.state == blockCommitted {
			c.fresh += int(f.n)
			c.enqueued += f.n
			c.m.enqueued.Add(uint64(f.n))
			visible = true
		} else {
			c.abortedTo = max(c.abortedTo, f.start+f.n)
		}
		// f's hook has run (this call may be it), and its Tx runs no
		// other: nothing refers to f any more.
		f.c = nil
		blockPool.Put(f)
		k++
	}
	if k > 0 {
		// Shift in place, keeping the slice's room.
		n := copy(c.blocks, c.blocks[k:])
		clear(c.blocks[n:])
		c.blocks = c.blocks[:n]
	}
	if len(c.blocks) > 0 {
		c.watermark = c.blocks[0].start
	} else {
		c.watermark = c.next
	}
	if visible {
		c.notify()
	}
}

// notifyLocal wakes every Wait of this process, as notify does, taking mu.
func (c *core) notifyLocal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notify()
}

// notify wakes every Wait. The caller holds mu. A channel nobody was
// handed (see changedCh) has nobody to wake: it is kept, and a Wait that
// takes it later checks what changed under mu first.
func (c *core) notify() {
	if !c.watched {
		return
	}
	close(c.changed)
	c.changed, c.watched = make(chan struct{}), false
}

// changedLocked returns the channel that the next change closes. The
// caller holds mu.
func (c *core) changedLocked() chan struct{} {
	c.watched = true
	return c.changed
}

// head is the oldest sequence number not yet consumed.
func (c *core) head() int64 {
	for _, e := range c.order {
		if !e.removed {
			return e.seq
		}
	}
	return c.cursor
}

// headWithout is what head becomes once the entries in es are consumed,
// counting those consumed by batches applied already as consumed too.
func (c *core) headWithout(es []*entry) int64 {
	for _, e := range es {
		e.mark = true
	}
	h := c.cursor
	for _, e := range c.order {
		if !e.removed && !e.mark && !e.gone {
			h = e.seq
			break
		}
	}
	for _, e := range es {
		e.mark = false
	}
	return h
}

// addEntry adds the entry of the message at the cursor. The caller holds
// mu.
func (c *core) addEntry(e *entry) {
	c.order = append(c.order, e)
}

// entryAt returns the live entry of message seq, or nil. order is sorted
// by seq without repeats, so seq sits at most seq - order[0].seq places
// in; it is there unless gaps (aborted enqueues, messages consumed ahead
// of older ones and dropped) came before it, and then a binary search
// finds it. The caller holds mu.
func (c *core) entryAt(seq int64) *entry {
	o := c.order
	if len(o) == 0 || seq < o[0].seq {
		return nil
	}
	i := seq - o[0].seq
	if i >= int64(len(o)) || o[i].seq != seq {
		j, found := slices.BinarySearchFunc(o, seq, func(e *entry, seq int64) int { return cmp.Compare(e.seq, seq) })
		if !found {
			return nil
		}
		i = int64(j)
	}
	if e := o[i]; !e.removed {
		return e
	}
	return nil
}

// live is the number of entries not removed. The caller holds mu.
func (c *core) live() int { return len(c.order) - c.nremoved }

// remove forgets a consumed entry.
func (c *core) remove(e *entry) {
	c.setState(e, stBusy, time.Time{})
	c.freeSlot(e)
	c.leaveGroup(e)
	e.removed = true
	c.nremoved++
	k := 0
	for k < len(c.order) && c.order[k].removed {
		c.order[k] = nil
		k++
	}
	c.nremoved -= k
	if k == len(c.order) {
		c.order = c.order[:0] // keeps its room: the next entry goes there
	} else {
		c.order = c.order[k:]
	}
	if c.nremoved > 64 && c.nremoved > len(c.order)/2 {
		kept := make([]*entry, 0, len(c.order)-c.nremoved)
		for _, e := range c.order {
			if !e.removed {
				kept = append(kept, e)
			}
		}
		c.order, c.nremoved = kept, 0
	}
}

// setState moves e to state s; deadline is for stLeased and stWaiting.
func (c *core) setState(e *entry, s entryState, deadline time.Time) {
	switch e.state {
	case stReady:
		c.nready--
	case stLeased:
		c.nleased--
	case stWaiting:
		c.nwaiting--
	case stBlocked:
		c.nblocked--
	}
	e.state, e.deadline = s, deadline
	e.gen++
	switch s {
	case stLeased:
		c.takeSlot(e)
	case stReady, stWaiting:
		c.freeSlot(e)
	}
	switch s {
	case stBlocked:
		c.nblocked++
	case stReady:
		c.nready++
		c.ready.push(heapItem{e: e, gen: e.gen})
	case stLeased, stWaiting:
		if s == stLeased {
			c.nleased++
		} else {
			c.nwaiting++
		}
		c.timers.push(heapItem{e: e, gen: e.gen, at: deadline})
		if c.timers.items[0].e == e {
			c.notify() // Waits sleeping until a later deadline recompute it
		}
	}
	c.trimHeaps()
}

// takeSlot counts e as in flight, if it is not yet. The caller holds mu.
func (c *core) takeSlot(e *entry) {
	if !e.slot {
		e.slot = true
		c.nslots++
	}
}

// freeSlot counts e out of flight, if it was in, and wakes the Waits that
// the cap held back. The caller holds mu.
func (c *core) freeSlot(e *entry) {
	if e.slot {
		e.slot = false
		c.nslots--
		if c.ctl.max > 0 {
			c.notify()
		}
	}
}

// trimHeaps drops stale heap items when they outnumber the live ones.
func (c *core) trimHeaps() {
	c.ready.trim(c.nready)
	c.timers.trim(c.nleased + c.nwaiting)
}

// expire makes every message whose lease or delay ended by now visible.
func (c *core) expire(now time.Time) {
	for c.timers.len() > 0 && !c.timers.items[0].at.After(now) {
		it := c.timers.pop()
		if it.live() && (it.e.state == stLeased || it.e.state == stWaiting) {
			if it.e.state == stLeased {
				c.leaseExpired(it.e.seq, int(it.e.attempts))
			}
			c.setState(it.e, stReady, time.Time{})
		}
	}
}

// nextDeadline is the earliest time a leased or waiting message becomes
// visible again.
func (c *core) nextDeadline() (time.Time, bool) {
	for c.timers.len() > 0 && !c.timers.items[0].live() {
		c.timers.pop()
	}
	if c.timers.len() == 0 {
		return time.Time{}, false
	}
	return c.timers.items[0].at, true
}

// popReady returns the oldest visible-again entry, or nil.
func (c *core) popReady() *entry {
	for c.ready.len() > 0 {
		it := c.ready.pop()
		if it.live() && it.e.state == stReady {
			return it.e
		}
	}
	return nil
}

// readyEntries returns the visible-again entries, oldest first, without
// changing them.
func (c *core) readyEntries(limit int) []*entry {
	h := itemHeap{items: slices.Clone(c.ready.items), less: bySeq}
	var out []*entry
	for h.len() > 0 && len(out) < limit {
		it := h.pop()
		if it.live() && it.e.state == stReady {
			out = append(out, it.e)
		}
	}
	return out
}

// leased returns the entry an ID names, if its lease may still act on it:
// the message is leased under that ID, or its lease ended and nobody has
// received it since.
func (c *core) leased(id ID) (*entry, error) {
	if id.lease == 0 {
		return nil, fmt.Errorf("%w: queue %q: message %d: zero lease (messages from Peek and Pop have no lease)", tipkv.ErrInvalid, c.name, id.seq)
	}
	e := c.entryAt(id.seq)
	if e == nil || e.lease != id.lease || (e.state != stLeased && e.state != stReady) {
		return nil, fmt.Errorf("queue %q: message %d (id %s): %w", c.name, id.seq, id, ErrLeaseLost)
	}
	return e, nil
}

// saved is an entry's state before a write about it, to restore if the
// write does not commit.
type saved struct {
	e        *entry
	state    entryState
	deadline time.Time
}

func (c *core) restore(ss []saved) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range ss {
		if !s.e.removed {
			c.setState(s.e, s.state, s.deadline)
		}
	}
	c.notify()
}

// itemLives reports from memory, on an exclusive engine, whether message
// seq is still an item of the queue, when memory knows: a number below
// the watermark past the gaps aborted enqueues left and not yet read
// (fresh), or one with a live entry whose consume has not been applied.
// Anything else (a number being enqueued, consumed, a gap, a dead letter)
// is not known: the store answers. It is what an until-done idempotency
// key asks of a duplicate (once.Op.Lives).
func (c *core) itemLives(seq int64) (lives, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.loaded || c.closed || seq >= c.watermark:
		return false, false
	case seq >= c.cursor:
		return true, seq >= c.abortedTo
	}
	if e := c.entryAt(seq); e != nil && !e.gone {
		return true, true
	}
	return false, false
}
