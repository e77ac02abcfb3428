package queue

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
)

// Message is one message read from a queue. Its memory belongs to the
// caller.
type Message[T any] struct {
	// ID names this delivery for Ack, Release, Retry and Extend. It is the zero
	// ID for messages from Peek and Pop.
	ID ID
	// Seq is the message's position in the queue: later enqueues get
	// larger numbers.
	Seq int64
	// Value is the decoded message.
	Value T
	// Attempts counts the deliveries of the message, this one included
	// (for Peek: the deliveries so far).
	Attempts int
	// Enqueued is when the message was enqueued: the commit time of the
	// Update that enqueued it, the DB's clock (tipkv.Options.Clock) read
	// once per Update, as the document versions it writes carry.
	Enqueued time.Time
	// Headers are what the producer gave EnqueueWith, nil if nothing.
	Headers Headers
	// Group is the message group the producer gave EnqueueWith, "" for
	// none (see "Message groups" in the package doc).
	Group string

	meta []byte // the encoded metadata, nil for none
}

// Metadata returns the metadata the message was enqueued with
// (tipkv.WithMetadata on the Enqueue's writer, or the Update's
// tipkv.Batch.SetMetadata): the shape document versions carry, the zero
// Metadata when it has none. It is decoded now, not by the read that
// returned m. Metadata that does not decode is ErrCorrupt.
func (m Message[T]) Metadata() (tipkv.Metadata, error) { return decodeMeta(m.meta, m.Seq) }

// HasMetadata reports whether the message was enqueued with metadata,
// without decoding it.
func (m Message[T]) HasMetadata() bool { return m.meta != nil }

func decodeMeta(b []byte, seq int64) (tipkv.Metadata, error) {
	if b == nil {
		return tipkv.Metadata{}, nil
	}
	m, err := docfmt.ParseMeta(b)
	if err != nil {
		return tipkv.Metadata{}, fmt.Errorf("%w: message %d: metadata: %w", tipkv.ErrCorrupt, seq, err)
	}
	return tipkv.Metadata(m), nil
}

// Receive leases up to max of the oldest visible messages to the caller
// for the lease duration, oldest first: messages whose lease ended or that
// were released come before never-delivered ones, as they are older. While
// a lease holds, no other Receive or Pop gets the message; Ack removes it,
// Release makes it visible again, Extend prolongs the lease. When a lease
// ends without an Ack the message is visible again and will be delivered
// again, with Attempts one higher: delivery is at least once.
//
// Receive counts the delivery durably before it returns (one write, synced
// unless the DB is NoSync), so MaxAttempts holds across crashes and, on a
// shared engine, across processes. A message delivered MaxAttempts times
// already moves to the dead-letter queue in that write instead of being
// returned. It returns no messages and no error when nothing is visible,
// and while the queue is paused (see Pause); see Wait. Under a cap on
// messages in flight (SetMaxInFlight) it takes no more than the room
// left, none at the cap.
//
// On Pebble the lease lives in memory and a restart ends it. On a shared
// engine the write also stores the lease's end in the message, for the
// other processes to see: it outlives a restart (held by nobody, the
// message comes back when it ends), and a lapsed lease is taken over only
// Caps.ClockSkew after it ended. The write requires each message to hold
// what Receive read: if another process delivered one of them first,
// Receive reads again, at once (after 100 such losses in a row it fails
// with an error matching tipkv.ErrConflict). A process that lost such a
// race starts its next Receives at a random offset into the visible
// messages, so that consumers crowding the head take disjoint messages
// (see "Shared engines" in the package doc): with several consumers,
// "oldest first" holds for each Receive's own messages, not across them.
// Goroutines of one handle never race each other. It takes at most as
// many messages as one batch of the engine holds.
//
// A message whose stored value does not decode also moves to the
// dead-letter queue; Receive then returns the other messages together with
// an error that matches tipkv.ErrCorrupt and names the key.
//
// max < 1, lease <= 0, and a lease that would end after 2262 (see
// EnqueueAt) are tipkv.ErrInvalid, and nothing is delivered. Leases end by
// the DB's clock (tipkv.Options.Clock).
func (q *Queue[T]) Receive(max int, lease time.Duration) ([]Message[T], error) {
	if max < 1 || lease <= 0 {
		return nil, fmt.Errorf("%w: queue %q: receive %d messages for %v: want max >= 1 and lease > 0", tipkv.ErrInvalid, q.c.name, max, lease)
	}
	return q.deliver(max, lease, false)
}

// Pop removes up to max of the oldest visible messages and returns them,
// in one write: delivery at most once. A crash after Pop returns loses the
// messages if the caller has not acted on them. Messages delivered
// MaxAttempts times already move to the dead-letter queue instead, as in
// Receive. On a shared engine the write requires each message to hold what
// Pop read, so no two processes pop one message; the loser reads again.
// While the queue is paused Pop returns nothing; it leases nothing, so the
// cap of SetMaxInFlight does not hold it back.
func (q *Queue[T]) Pop(max int) ([]Message[T], error) {
	if max < 1 {
		return nil, fmt.Errorf("%w: queue %q: pop %d messages: want max >= 1", tipkv.ErrInvalid, q.c.name, max)
	}
	return q.deliver(max, 0, true)
}

func (q *Queue[T]) deliver(max int, lease time.Duration, pop bool) ([]Message[T], error) {
	c := q.c
	op := "receive"
	if pop {
		op = "pop"
	}
	if c.sm != nil {
		return q.deliverShared(max, lease, pop, op)
	}
	now, err := c.now()
	if err == nil && !pop {
		_, err = after(now, lease)
	}
	if err != nil {
		return nil, fmt.Errorf("queue %q: %s: %w", c.name, op, err)
	}
	sc := getScratch()
	defer sc.put()
	ts, err := c.take(max, now, q.maxAttempts, !pop, sc)
	if err != nil {
		return nil, fmt.Errorf("queue %q: %s: %w", c.name, op, err)
	}
	if cap(ts) > cap(sc.ts) {
		sc.ts = ts[:0]
	}
	if len(ts) == 0 {
		return nil, nil
	}
	// Values decode into out, one slot per taken message; the dead ones'
	// slots are squeezed out after the commit.
	out := make([]Message[T], len(ts))
	var bad []error
	for i, t := range ts {
		if !t.dead && q.raw {
			// t.payload is this message's own copy, capped at its end.
			*any(&out[i].Value).(*[]byte) = t.payload
		} else if !t.dead {
			if err := q.codec.Decode(t.payload, &out[i].Value); err != nil {
				t.dead, t.bad = true, c.corrupt(t.e.seq, err)
			}
		}
		if t.bad != nil {
			c.undecodable(t.e.seq, t.bad)
			bad = append(bad, t.bad)
		}
	}
	if err := c.commitTake(ts, now, pop, lease, sc); err != nil {
		return nil, fmt.Errorf("queue %q: %s: %w", c.name, op, err)
	}
	n := 0
	for i, t := range ts {
		if t.dead {
			continue
		}
		var id ID
		if !pop {
			id = ID{seq: t.e.seq, lease: t.lease}
		}
		out[n] = Message[T]{
			ID:       id,
			Seq:      t.e.seq,
			Value:    out[i].Value,
			Attempts: t.hdr.attempts + 1,
			Enqueued: fromUnixNano(t.hdr.enqueued),
			Headers:  decodeHeaders(t.hdr.headers),
			Group:    string(t.hdr.group),
			meta:     bytes.Clone(t.hdr.meta),
		}
		n++
	}
	clear(out[n:])
	out = out[:n]
	if len(bad) > 0 {
		return out, fmt.Errorf("queue %q: %s: moved to the dead-letter queue: %w", c.name, op, errors.Join(bad...))
	}
	return out, nil
}

// Peek returns up to max of the oldest visible messages without leasing or
// changing them, in the order Receive would deliver them. Their ID is the
// zero ID. A stored value that does not decode is an error that matches
// tipkv.ErrCorrupt and names the key.
func (q *Queue[T]) Peek(max int) ([]Message[T], error) {
	c := q.c
	if max < 1 {
		return nil, fmt.Errorf("%w: queue %q: peek %d messages: want max >= 1", tipkv.ErrInvalid, c.name, max)
	}
	now, err := c.now()
	if err != nil {
		return nil, fmt.Errorf("queue %q: peek: %w", c.name, err)
	}
	if c.sm != nil {
		return q.peekShared(max, now)
	}
	ts, err := c.peek(max, now)
	if err != nil {
		return nil, fmt.Errorf("queue %q: peek: %w", c.name, err)
	}
	out := make([]Message[T], len(ts))
	for i, t := range ts {
		if t.bad != nil {
			return nil, fmt.Errorf("queue %q: peek: %w", c.name, t.bad)
		}
		if err := q.codec.Decode(t.payload, &out[i].Value); err != nil {
			return nil, fmt.Errorf("queue %q: peek: %w", c.name, c.corrupt(t.e.seq, err))
		}
		out[i].Seq = t.e.seq
		out[i].Attempts = t.hdr.attempts
		out[i].Enqueued = fromUnixNano(t.hdr.enqueued)
		out[i].Headers, out[i].meta, out[i].Group = decodeHeaders(t.hdr.headers), bytes.Clone(t.hdr.meta), string(t.hdr.group)
	}
	return out, nil
}

// taken is a message picked by take, on its way to its consumer or to the
// dead-letter queue.
type taken struct {
	e       *entry
	hdr     header
	raw     []byte // the stored value (a copy)
	payload []byte // aliases raw; nil when the header is corrupt
	dead    bool   // moves to the dead-letter queue
	bad     error  // why it is corrupt, if it is
	lease   uint64 // set by commitTake
}

// corrupt wraps a decoding error of message seq so that it matches
// ErrCorrupt and names the key.
func (c *core) corrupt(seq int64, err error) error {
	if !errors.Is(err, codec.ErrCorrupt) {
		err = fmt.Errorf("%w: %v", codec.ErrCorrupt, err)
	}
	return fmt.Errorf("message %d (key %x): %w", seq, c.k.item(nil, seq), err)
}

// examine fills t from a stored item and decides whether it is dead.
func (c *core) examine(t *taken, e *entry, v []byte, maxAttempts int) *taken {
	t.e, t.raw = e, v
	h, payload, err := parseHeader(v, itemFormat)
	if err != nil {
		t.dead, t.bad = true, c.corrupt(e.seq, err)
		return t
	}
	t.hdr, t.payload = h, payload
	t.dead = maxAttempts > 0 && h.attempts >= maxAttempts
	return t
}

// take picks up to max deliverable messages, oldest first, and marks them
// busy; dead ones come along without counting. Messages whose visible-at
// time is later than now are set aside as waiting. It reads
// [head, watermark) only: visible-again messages by key, then fresh ones
// from the cursor with the watermark as the iterator's upper bound. It
// takes none while the queue is paused and, for a Receive (lease set), no
// more than the cap on messages in flight leaves room for; those it takes
// count as in flight at once.
func (c *core) take(limit int, now time.Time, maxAttempts int, lease bool, sc *scratch) ([]*taken, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, tipkv.ErrClosed
	}
	c.expire(now)
	if limit = c.room(lease, limit); limit == 0 {
		return sc.ts[:0], nil
	}
	out, err := c.takeLocked(limit, now, maxAttempts, sc)
	if err == nil && lease {
		for _, t := range out {
			if !t.dead {
				c.takeSlot(t.e)
			}
		}
	}
	return out, err
}

// takeLocked is take's work under mu, for limit > 0.
func (c *core) takeLocked(limit int, now time.Time, maxAttempts int, sc *scratch) ([]*taken, error) {
	out := sc.ts[:0] // deliver keeps its room for the next call
	al := allocator{want: limit, takens: sc.takensFor(limit)}
	fail := func(err error) ([]*taken, error) {
		for _, t := range out {
			c.setState(t.e, stReady, time.Time{})
		}
		return nil, err
	}
	n := 0
	for n < limit {
		e := c.popReady()
		if e == nil {
			break
		}
		sc.key = c.k.item(sc.key[:0], e.seq)
		v, err := c.store.Get(sc.key)
		if errors.Is(err, engine.ErrNotFound) {
			c.remove(e) // gone from under us; nothing to deliver
			c.enqueued--
			continue
		}
		c.setState(e, stBusy, time.Time{})
		if err != nil {
			t := al.taken()
			t.e = e
			out = append(out, t)
			return fail(err)
		}
		t := c.examine(al.taken(), e, v, maxAttempts)
		out = append(out, t)
		if !t.dead {
			n++
		}
	}
	nowNS := now.UnixNano()
	// A few messages are read by key: sequence numbers are dense, so the
	// next one is almost always at the cursor, and a Get costs less than
	// opening an iterator (Pop(1) spent half its time opening one). A
	// missing key (a gap an aborted enqueue left) hands over to the
	// iterator, which steps over gaps.
	for n < limit && limit-n <= pointReads && c.cursor < c.watermark {
		seq := c.cursor
		sc.key = c.k.item(sc.key[:0], seq)
		v, err := c.store.Get(sc.key)
		if errors.Is(err, engine.ErrNotFound) {
			break
		}
		if err != nil {
			return fail(err)
		}
		if t, counted := c.takeFresh(&al, seq, v, nowNS, maxAttempts); t != nil {
			out = append(out, t)
			if counted {
				n++
			}
		}
	}
	if n == limit || c.cursor >= c.watermark {
		if c.cursor >= c.watermark {
			c.fresh = 0
		}
		return out, nil
	}
	// The engine may fetch the keys wanted in one go (a hint: delayed
	// and dead messages make the read go on past it).
	sc.lo, sc.hi = c.k.item(sc.lo[:0], c.cursor), c.k.item(sc.hi[:0], c.watermark)
	it, err := engine.NewIterN(c.store, sc.lo, sc.hi, limit-n)
	if err != nil {
		return fail(err)
	}
	exhausted := true
	for ok := it.First(); ok; ok = it.Next() {
		seq, err := seqOf(c.k.itemPrefix, it.Key())
		if err != nil {
			_ = it.Close()
			return fail(err)
		}
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return fail(err)
		}
		t, counted := c.takeFresh(&al, seq, al.clone(v), nowNS, maxAttempts)
		if t == nil {
			continue
		}
		out = append(out, t)
		if counted {
			n++
		}
		if n == limit {
			exhausted = false
			break
		}
	}
	if err := closeIter(it); err != nil {
		return fail(err)
	}
	if exhausted {
		c.cursor, c.fresh = c.watermark, 0
	}
	return out, nil
}

// pointReads is the most messages take reads by key before it opens an
// iterator.
const pointReads = 4

// takeFresh takes the never-looked-at message seq, stored as v (which it
// keeps), from the cursor: it gets an entry, and is returned to deliver
// (counted unless dead) or, if its visible-at time is later than now or
// it is behind its group's window, set aside as waiting or blocked (nil).
// The caller holds mu.
func (c *core) takeFresh(al *allocator, seq int64, v []byte, nowNS int64, maxAttempts int) (*taken, bool) {
	e := al.entry()
	e.seq, e.state = seq, stBusy
	c.addEntry(e)
	c.cursor = seq + 1
	c.fresh = max(c.fresh-1, 0)
	t := c.examine(al.taken(), e, v, maxAttempts)
	if t.bad == nil && !c.admit(e, t.hdr, nowNS) {
		return nil, false
	}
	return t, !t.dead
}

// commitTake writes what take picked, in one batch: each delivered
// message's attempts count (Receive) or its deletion (Pop); each dead one
// into the dead-letter queue and out of the queue; and the queue state when
// anything was removed (dead letters dated now). Then it leases the
// delivered messages, the lease starting when the write has returned, or,
// if the write failed, makes them visible again.
func (c *core) commitTake(ts []*taken, now time.Time, pop bool, lease time.Duration, sc *scratch) error {
	consumed := sc.consumed[:0]
	for _, t := range ts {
		if t.dead || pop {
			consumed = append(consumed, t.e)
		}
	}
	sc.consumed = consumed
	died := now.UnixNano()
	err := link.Write(c.db, func(tx *link.Tx) error {
		b := tx.Batch
		// The batch copies what it is given, so one buffer serves every
		// key and value.
		for _, t := range ts {
			buf := sc.buf[:0]
			switch {
			case t.dead:
				buf = c.k.dead(buf, t.e.seq)
			case pop:
				continue
			default:
				buf = c.k.item(buf, t.e.seq)
			}
			v := len(buf)
			switch {
			case t.dead && t.payload == nil: // keep the corrupt bytes as they were
				buf = append(append(buf, deadRawFormat), t.raw...)
			case t.dead:
				h := t.hdr
				h.at = died
				buf = append(appendHeader(buf, deadFormat, h), t.payload...)
			default:
				h := t.hdr
				h.attempts++
				h.at = 0
				buf = append(appendHeader(buf, itemFormat, h), t.payload...)
			}
			sc.buf = buf
			if err := b.Set(buf[:v], buf[v:]); err != nil {
				return err
			}
		}
		if len(consumed) == 0 {
			return nil
		}
		c.writeState(tx, consumed)
		sc.seqs = appendSeqs(sc.seqs[:0], consumed)
		return c.deleteRuns(b, sc.seqs, &sc.buf)
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		for _, t := range ts {
			if !t.e.removed {
				c.setState(t.e, stReady, time.Time{})
			}
		}
		c.notify()
		return err
	}
	deadline := c.clock().Add(lease)
	for _, t := range ts {
		switch {
		case t.dead:
			c.deadLettered(t.e.seq, t.hdr.attempts, t.bad)
		default:
			c.delivered(t.e.seq, t.hdr.attempts)
		}
		if t.dead || pop {
			c.remove(t.e)
			continue
		}
		t.e.lease = newLease()
		t.e.attempts = uint32(t.hdr.attempts + 1)
		t.lease = t.e.lease
		c.setState(t.e, stLeased, deadline)
	}
	return nil
}

// appendSeqs appends the sequence numbers of es to dst, sorted.
func appendSeqs(dst []int64, es []*entry) []int64 {
	for _, e := range es {
		dst = append(dst, e.seq)
	}
	slices.Sort(dst)
	return dst
}

// Why knobs.Queue.ConsumedRangeMin, the shortest run of consecutive
// consumed messages deleted with one DeleteRange (shorter runs get point
// Deletes), is 128 by default. Every range tombstone in
// Pebble's memtable is fragmented again by each new iterator after a
// DeleteRange, so a memtable full of short range tombstones makes every
// read pay for all of them. Receiving and acking 80,000 messages, acks of
// 20 were 16x slower with DeleteRange than with point deletes, acks of 50
// 3.2x, acks of 100 1.35x; from 250 they cost the same, and a long run
// then leaves one tombstone instead of hundreds (BenchmarkDeleteRuns;
// BENCHMARKS.md, "Queues").

// deleteRuns deletes the items at the sorted sequence numbers ss: each run
// of at least knobs.Queue.ConsumedRangeMin consecutive numbers with one
// DeleteRange, a shorter one with point Deletes. Every number is consumed
// exactly once, so no two tombstones ever cover the same key.
func (c *core) deleteRuns(b engine.Batch, ss []int64, scratch *[]byte) error {
	// The batch copies what it is given, so the keys share one buffer.
	buf := (*scratch)[:0]
	defer func() { *scratch = buf }()
	for i := 0; i < len(ss); {
		j := i
		for j+1 < len(ss) && ss[j+1] == ss[j]+1 {
			j++
		}
		if j-i+1 >= knobs.Queue.ConsumedRangeMin {
			buf = c.k.item(buf[:0], ss[i])
			lo := len(buf)
			buf = c.k.item(buf, ss[j]+1)
			if err := b.DeleteRange(buf[:lo], buf[lo:]); err != nil {
				return err
			}
		} else {
			for _, s := range ss[i : j+1] {
				buf = c.k.item(buf[:0], s)
				if err := b.Delete(buf); err != nil {
					return err
				}
			}
		}
		i = j + 1
	}
	return nil
}

// peek returns up to max visible messages, oldest first, changing nothing.
func (c *core) peek(limit int, now time.Time) ([]*taken, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, tipkv.ErrClosed
	}
	c.expire(now)
	var out []*taken
	for _, e := range c.readyEntries(limit) {
		v, err := c.store.Get(c.k.item(nil, e.seq))
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c.examine(new(taken), e, v, 0))
	}
	if len(out) == limit || c.cursor >= c.watermark {
		return out, nil
	}
	it, err := engine.NewIterN(c.store, c.k.item(nil, c.cursor), c.k.item(nil, c.watermark), limit-len(out))
	if err != nil {
		return nil, err
	}
	nowNS := now.UnixNano()
	var seen map[string]int // group messages read past the cursor, by group
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		seq, err := seqOf(c.k.itemPrefix, it.Key())
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		t := c.examine(new(taken), &entry{seq: seq}, bytes.Clone(v), 0)
		if t.bad == nil && len(t.hdr.group) > 0 {
			if seen == nil {
				seen = make(map[string]int)
			}
			if c.blockedIn(t.hdr, seen) {
				continue
			}
		}
		if t.bad == nil && t.hdr.at > nowNS {
			continue
		}
		out = append(out, t)
	}
	return out, closeIter(it)
}

// allocator hands out takens, entries and value copies from chunks, so
// that a Receive of n messages allocates a few times, not 3n times. A chunk
// lives while anything in it does. The first chunks are sized for want
// messages (a Pop(1) allocates one of each, not 32), later ones for 32.
type allocator struct {
	want    int
	takens  []taken
	entries []entry
	bytes   []byte
}

// chunk is the number of items the next chunk holds.
func (a *allocator) chunk(have int) int {
	if have == 0 {
		return min(max(a.want, 1), 32)
	}
	return 32
}

func (a *allocator) taken() *taken {
	if len(a.takens) == cap(a.takens) {
		a.takens = make([]taken, 0, a.chunk(cap(a.takens)))
	}
	a.takens = a.takens[:len(a.takens)+1]
	return &a.takens[len(a.takens)-1]
}

func (a *allocator) entry() *entry {
	if len(a.entries) == cap(a.entries) {
		a.entries = make([]entry, 0, a.chunk(cap(a.entries)))
	}
	a.entries = a.entries[:len(a.entries)+1]
	return &a.entries[len(a.entries)-1]
}

// clone copies v into the current chunk; the copy's capacity ends at its
// length, so appending to it never writes into the chunk.
func (a *allocator) clone(v []byte) []byte {
	if cap(a.bytes)-len(a.bytes) < len(v) {
		a.bytes = make([]byte, 0, max(len(v), 2*cap(a.bytes), min(len(v)*a.chunk(cap(a.bytes)), 4096)))
	}
	start := len(a.bytes)
	a.bytes = append(a.bytes, v...)
	return a.bytes[start:len(a.bytes):len(a.bytes)]
}

// scratch is what a delivery or an Ack needs only until it returns: the
// slices and buffers it fills, kept for the next call (scratches) so that
// steady Receive, Pop and Ack calls do not allocate them again.
type scratch struct {
	ts       []*taken
	takens   []taken
	consumed []*entry
	seqs     []int64
	buf      []byte // keys and values for the batch, which copies them
	key      []byte // a key to read
	lo, hi   []byte // an iterator's bounds
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratches.Get().(*scratch) }

// maxScratch is the most items (or KiB of buffer) a pooled scratch keeps
// room for.
const maxScratch = 1024

// takensFor returns room for the takens of a call that delivers up to
// limit messages: the scratch's own, grown to limit (up to maxScratch).
func (sc *scratch) takensFor(limit int) []taken {
	if want := min(limit, maxScratch); cap(sc.takens) < want {
		sc.takens = make([]taken, 0, want)
	}
	return sc.takens[:0]
}

// put drops what sc points to and pools it, unless it grew large.
func (sc *scratch) put() {
	if cap(sc.ts) > maxScratch || cap(sc.consumed) > maxScratch || cap(sc.seqs) > maxScratch || cap(sc.buf) > maxScratch<<10 {
		return
	}
	clear(sc.ts[:cap(sc.ts)])
	clear(sc.takens[:cap(sc.takens)])
	clear(sc.consumed[:cap(sc.consumed)])
	sc.ts, sc.takens, sc.consumed = sc.ts[:0], sc.takens[:0], sc.consumed[:0]
	scratches.Put(sc)
}
