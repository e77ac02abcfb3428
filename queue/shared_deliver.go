package queue

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/queuefmt"
)

// Deliveries and lease writes on a shared engine (see shared.go).

// picked is a stored item chosen by pick, on its way to its consumer or
// to the dead-letter queue.
type picked struct {
	seq     int64
	raw     []byte // the stored bytes (a copy), required at commit
	hdr     header
	payload []byte // aliases raw; nil when the header is corrupt
	dead    bool   // moves to the dead-letter queue
	bad     error  // why it is corrupt, if it is
	newRaw  []byte // Receive: the leased item written
	lapsed  bool   // the item was leased, and its lease ended
}

// errNothing ends a delivery's write when a scan finds nothing to deliver.
var errNothing = errors.New("queue: nothing to deliver")

// pick reads up to limit deliverable items of a shared queue, oldest
// first, with the dead ones (delivered maxAttempts times, or corrupt) that
// come before them, which do not count. An item is deliverable when it is
// not leased and its delay has ended, or its lease ended ClockSkew ago,
// and it is in its group's window: the read is from the head, so it counts
// every live item of a group before it.
// Items this process is writing about, or claimed by another delivery of
// it, or wrote since the read began, are passed over (shared_claims.go).
// A delivery (peek unset) first passes over skip deliverable items and
// the dead ones among them, and falls back on the last of those if fewer
// than limit follow; it claims what it picks, and the caller drops the
// claims. For Peek (maxAttempts 0 and peek set), corrupt items come back
// with bad set and nothing is dead. The items picked fit in one batch of
// the engine's limits (at least one is picked, fit or not).
func (c *core) pick(limit int, now time.Time, maxAttempts int, peek bool, skip, ctlSize int) ([]*picked, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	since := c.beginRead()
	defer c.endRead(since)
	nowNS := now.UnixNano()
	var out, passed []*picked
	// The control key goes in the batch too: required, and written again
	// under a cap (bigger by the leases taken).
	n, ops, size := 0, 2, 2*ctlSize+limit*queuefmt.MaxLeaseSize
	// fits adds p's share of the batch, unless it would overflow it: the
	// condition, the new value or the delete, and for a dead letter both.
	fits := func(p *picked) bool {
		if peek {
			return true
		}
		keyLen := len(c.k.itemPrefix) + 8
		needOps, needSize := 1, 2*(len(p.raw)+keyLen)+64
		if p.dead {
			needOps, needSize = 2, 2*len(p.raw)+3*keyLen+64
		}
		if len(out) > 0 && ((c.sm.maxOps > 0 && ops+needOps > c.sm.maxOps-2) || (c.sm.maxBytes > 0 && size+needSize > c.sm.maxBytes-batchSlack)) {
			return false
		}
		ops, size = ops+needOps, size+needSize
		return true
	}
	wins := windows{size: c.window}
	c.loadRuns(&wins)
	err := c.scanJumping(limit+skip, func(seq int64, v []byte) (bool, error) {
		held := c.skipHeld(seq, v, since)
		h, leased, _, err := parseItem(v)
		if wins.item(seq, h, err == nil) {
			return true, nil
		}
		if held {
			return true, nil
		}
		if err == nil && c.sm.visibleAt(h, leased) > nowNS {
			return true, nil
		}
		// v is the scan's: what p keeps (header's headers, payload) must
		// alias a copy of its own.
		p := &picked{seq: seq, raw: bytes.Clone(v), lapsed: err == nil && leased}
		if err != nil {
			p.dead, p.bad = !peek, c.corrupt(seq, err)
		} else {
			p.hdr, _, p.payload, _ = parseItem(p.raw)
			p.dead = maxAttempts > 0 && h.attempts >= maxAttempts
		}
		if skip > 0 {
			// Another consumer's stretch: its dead letters are its own.
			if !p.dead {
				passed = append(passed, p)
				skip--
			}
			return true, nil
		}
		if !fits(p) {
			return false, nil
		}
		out = append(out, p)
		if !p.dead {
			n++
		}
		return n < limit, nil
	}, wins.jump)
	if err != nil {
		return nil, err
	}
	c.storeRuns(&wins)
	if peek {
		return out, nil
	}
	// Fewer than limit past the offset: take the last of those passed
	// over, which come first.
	var back []*picked
	for i := len(passed) - 1; i >= 0 && n < limit && fits(passed[i]); i-- {
		back = append(back, passed[i])
		n++
	}
	if len(back) > 0 {
		slices.Reverse(back)
		out = append(back, out...)
	}
	return c.claimPicks(out, since), nil
}

// skipHeld reports whether a read that began at since must pass over the
// item at seq: this process is writing about it now, another delivery of
// it claimed it, or it wrote the item after the read began (the read may
// show the item as it was before). Seeing the item otherwise, it settles a
// lease in doubt (see held.alt), and forgets a lease whose item another
// process has changed since.
func (c *core) skipHeld(seq int64, v []byte, since uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.staleLocked(seq, since) {
		return true
	}
	h := c.sm.held[seq]
	switch {
	case h == nil:
		return false
	case h.busy:
		return true
	case bytes.Equal(h.raw, v):
		h.suspect, h.alt = false, nil
	case h.suspect && h.alt != nil && bytes.Equal(h.alt, v):
		h.raw, h.deadline = h.alt, h.altDeadline
		h.suspect, h.alt = false, nil
	default:
		c.forget(h)
	}
	return false
}

// writePicked adds to tx what delivering ps does: each item required to
// hold the bytes read, then leased until deadline (Receive), deleted
// (Pop), or moved to the dead-letter queue dated now.
func (c *core) writePicked(tx *link.Tx, ps []*picked, now, deadline time.Time, pop bool) error {
	b := tx.Batch
	var gone []int64
	for _, p := range ps {
		key := c.k.item(nil, p.seq)
		if err := b.Require(engine.Equals(key, p.raw)); err != nil {
			return err
		}
		switch {
		case p.dead:
			var val []byte
			if p.payload == nil { // keep the corrupt bytes as they were
				val = append([]byte{deadRawFormat}, p.raw...)
			} else {
				h := p.hdr
				h.at = now.UnixNano()
				val = append(appendHeader(nil, deadFormat, h), p.payload...)
			}
			if err := b.Set(c.k.dead(nil, p.seq), val); err != nil {
				return err
			}
			gone = append(gone, p.seq)
		case pop:
			gone = append(gone, p.seq)
		default:
			h := p.hdr
			h.attempts++
			h.at = deadline.UnixNano()
			p.newRaw = itemValue(h, true, p.payload)
			if err := b.Set(key, p.newRaw); err != nil {
				return err
			}
		}
	}
	var buf []byte
	return c.deleteRuns(b, gone, &buf)
}

// deliverShared is Receive (pop false) and Pop on a shared engine: pick,
// then write the picks with their conditions; if another process
// delivered one of them first, pick again at once, further from the head
// (see shared_claims.go).
func (q *Queue[T]) deliverShared(max int, lease time.Duration, pop bool, op string) ([]Message[T], error) {
	c := q.c
	var ps []*picked
	var vals []T
	var deadline time.Time
	var ctl control   // the control written, if ctlVal
	var ctlVal []byte // the control key's new bytes, if the write sets it
	tries := 0
	err := c.write(c.db, func(tx *link.Tx) error {
		if tries++; tries > 1 {
			// The last try's write failed a condition: nothing written.
			c.dropClaims(ps, false)
			ps = nil
			if !pop {
				c.raced(true)
			}
		}
		now, err := c.now()
		if err != nil {
			return err
		}
		if !pop {
			if deadline, err = after(now, lease); err != nil {
				return err
			}
		}
		// After a failed try, read the control key again: the condition
		// that failed may be its.
		ct, ctlRaw, err := c.controlShared(tries > 1)
		if err != nil {
			return err
		}
		if ct.paused {
			return errNothing
		}
		ctlVal = nil
		limit := max
		var live []capLease
		counted := false // the leases were counted from the items by this try
		if ct.max > 0 && !pop {
			// Pop leases nothing: it is not capped.
			if !ct.counted {
				if err := c.countLeases(&ct, now.UnixNano()); err != nil {
					return err
				}
				counted = true
			}
			live = c.sm.liveLeases(ct.leases, now.UnixNano())
			limit = min(max, ct.max-len(live))
		}
		if limit > 0 {
			skip := 0
			if !pop {
				// Pop keeps to the head: each popper's messages come in
				// queue order.
				skip = c.offset(limit)
			}
			if ps, err = c.pick(limit, now, q.maxAttempts, false, skip, len(ctlRaw)); err != nil {
				return err
			}
		}
		if len(ps) == 0 && !counted {
			return errNothing
		}
		vals = make([]T, len(ps))
		for i, p := range ps {
			if !p.dead {
				if err := q.codec.Decode(p.payload, &vals[i]); err != nil {
					p.dead, p.bad = true, c.corrupt(p.seq, err)
				}
			}
		}
		// A Pause committed by another process since the control was
		// read fails this write, and so does every other delivery under
		// a cap, which counts its leases in the control key (and writes
		// them even when it delivers nothing, once it counted them, so
		// that the next need not count again).
		if err := c.requireControl(tx.Batch, ctlRaw); err != nil {
			return err
		}
		switch {
		case ct.max > 0 && !pop:
			seqs := make([]int64, 0, len(ps))
			var add []capLease
			for _, p := range ps {
				seqs = append(seqs, p.seq)
				if !p.dead {
					add = append(add, capLease{Seq: p.seq, End: deadline.UnixNano()})
				}
			}
			if ctl, ctlVal, err = c.setLeases(tx, ct, withLeases(live, seqs, add)); err != nil {
				return err
			}
		case ctlRaw == nil:
			// Create the key, so that the next deliveries require it to
			// be equal: engines check that without the deliveries
			// excluding each other, while an absent key's condition is a
			// row inserted for the commit on PostgreSQL, which every
			// other delivery of the queue would wait for.
			ctl, ctlVal = ct, appendControl(nil, ct)
			if err := tx.Batch.Set(c.k.control, ctlVal); err != nil {
				return err
			}
		}
		if len(ps) == 0 {
			return nil // only the count
		}
		return c.writePicked(tx, ps, now, deadline, pop)
	})
	if err == nil && ctlVal != nil {
		c.mu.Lock()
		c.sm.ctl, c.sm.ctlRaw, c.sm.ctlKnown = ctl, ctlVal, true
		c.mu.Unlock()
	}
	if errors.Is(err, errNothing) {
		c.advanceHead()
		return nil, nil
	}
	if err != nil {
		// Sent or not, the write may have landed only if it was sent:
		// reads in flight pass over its items either way.
		c.dropClaims(ps, true)
		return nil, fmt.Errorf("queue %q: %s: %w", c.name, op, err)
	}
	if tries == 1 && !pop {
		c.raced(false)
	}
	var gone []int64
	for _, p := range ps {
		if p.dead || pop {
			gone = append(gone, p.seq)
		}
	}
	c.consumedOwn(gone)
	out := make([]Message[T], 0, len(ps))
	var bad []error
	c.mu.Lock()
	c.dropClaimsLocked(ps, true)
	for i, p := range ps {
		if p.lapsed {
			c.leaseExpired(p.seq, p.hdr.attempts)
		}
		if p.bad != nil {
			c.undecodable(p.seq, p.bad)
			bad = append(bad, p.bad)
		}
		if p.dead {
			c.deadLettered(p.seq, p.hdr.attempts, p.bad)
			continue
		}
		c.delivered(p.seq, p.hdr.attempts)
		var id ID
		if !pop {
			id = ID{seq: p.seq, lease: newLease()}
			c.sm.held[p.seq] = &held{seq: p.seq, lease: id.lease, raw: p.newRaw, deadline: deadline, attempts: p.hdr.attempts + 1}
		}
		out = append(out, Message[T]{
			ID:       id,
			Seq:      p.seq,
			Value:    vals[i],
			Attempts: p.hdr.attempts + 1,
			Enqueued: fromUnixNano(p.hdr.enqueued),
			Headers:  decodeHeaders(p.hdr.headers),
			Group:    string(p.hdr.group),
			meta:     bytes.Clone(p.hdr.meta),
		})
	}
	c.mu.Unlock()
	c.advanceHead()
	if len(bad) > 0 {
		return out, fmt.Errorf("queue %q: %s: moved to the dead-letter queue: %w", c.name, op, errors.Join(bad...))
	}
	return out, nil
}

// peekShared is Peek on a shared engine.
func (q *Queue[T]) peekShared(max int, now time.Time) ([]Message[T], error) {
	c := q.c
	ps, err := c.pick(max, now, 0, true, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("queue %q: peek: %w", c.name, err)
	}
	out := make([]Message[T], len(ps))
	for i, p := range ps {
		if p.bad != nil {
			return nil, fmt.Errorf("queue %q: peek: %w", c.name, p.bad)
		}
		if err := q.codec.Decode(p.payload, &out[i].Value); err != nil {
			return nil, fmt.Errorf("queue %q: peek: %w", c.name, c.corrupt(p.seq, err))
		}
		out[i].Seq = p.seq
		out[i].Attempts = p.hdr.attempts
		out[i].Enqueued = fromUnixNano(p.hdr.enqueued)
		out[i].Headers, out[i].meta, out[i].Group = decodeHeaders(p.hdr.headers), bytes.Clone(p.hdr.meta), string(p.hdr.group)
	}
	return out, nil
}

// ackShared is Ack on a shared engine: each item must still hold the
// bytes this process wrote when it leased it (or last extended it).
func (c *core) ackShared(w tipkv.Writer, ids []ID) error {
	return c.write(w, func(tx *link.Tx) error {
		if err := c.owns(tx); err != nil {
			return err
		}
		hs, err := c.claim(ids)
		if err != nil {
			return err
		}
		ss := make([]int64, len(hs))
		var ct control
		tx.OnCommit(func() {
			c.m.acks.Add(uint64(len(hs)))
			c.dropHeld(hs, ss)
			c.consumedOwn(ss)
			if ct.max > 0 {
				c.notifyLocal() // room under the cap
			}
		})
		tx.OnAbort(func() { c.unclaim(hs) })
		for i, h := range hs {
			if err := tx.Batch.Require(engine.Equals(c.k.item(nil, h.seq), h.raw)); err != nil {
				return err
			}
			ss[i] = h.seq
		}
		slices.Sort(ss)
		if ct, err = c.endLeases(tx, ss); err != nil {
			return err
		}
		var buf []byte
		return c.deleteRuns(tx.Batch, ss, &buf)
	})
}

// endLeases adds to tx what ending the leases on the messages ss (sorted)
// does to the control key: required unchanged, and under a cap the
// leases are counted out. It returns the control read.
func (c *core) endLeases(tx *link.Tx, ss []int64) (control, error) {
	ct, _, err := c.useControl(tx)
	if err != nil || ct.max == 0 || !ct.counted {
		// Not counted yet: the leases are counted from the items, once
		// this write has ended them or before (then they stay counted
		// until they end, taking room no process can use meanwhile).
		return ct, err
	}
	now, err := c.now()
	if err != nil {
		return ct, err
	}
	_, _, err = c.setLeases(tx, ct, withLeases(c.sm.liveLeases(ct.leases, now.UnixNano()), ss, nil))
	return ct, err
}

// dropHeld forgets leases whose messages this process's commit consumed:
// the items ss.
func (c *core) dropHeld(hs []*held, ss []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		c.forget(h)
	}
	c.wroteLocked(ss...)
}

// rewriteHeld writes the item of a lease this process holds, with the
// condition that it holds what this process last wrote: released (visible
// at at, 0 for now) or, with lease set, leased until at. It returns the
// bytes written.
func (c *core) rewriteHeld(id ID, at time.Time, lease bool) error {
	return c.write(c.db, func(tx *link.Tx) error {
		hs, err := c.claim([]ID{id})
		if err != nil {
			return err
		}
		h := hs[0]
		hdr, _, payload, err := parseItem(h.raw)
		if err != nil {
			c.unclaimNow(hs)
			return c.corrupt(h.seq, err)
		}
		hdr.at = unixNano(at)
		val := itemValue(hdr, lease, payload)
		if lease {
			if err := c.moveLease(tx, h.seq, at); err != nil {
				c.unclaimNow(hs)
				return err
			}
		} else if _, err := c.endLeases(tx, []int64{h.seq}); err != nil {
			c.unclaimNow(hs)
			return err
		}
		if lease {
			tx.OnCommit(func() {
				c.mu.Lock()
				defer c.mu.Unlock()
				h.raw, h.deadline, h.busy = val, at, false
				c.wroteLocked(h.seq)
			})
			tx.OnAbort(func() { c.unclaimExtend(h, val, at) })
		} else {
			tx.OnCommit(func() {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.forget(h)
				c.wroteLocked(h.seq)
				c.notify() // visible now, or a new deadline for Waits here
			})
			tx.OnAbort(func() { c.unclaim(hs) })
		}
		key := c.k.item(nil, h.seq)
		if err := tx.Batch.Require(engine.Equals(key, h.raw)); err != nil {
			return err
		}
		return tx.Batch.Set(key, val)
	})
}

// moveLease adds to tx what extending the lease on message seq to end at
// does to the control key: required unchanged, and under a cap the
// lease's end moved. A lease that ended is counted out already: it takes
// room again, and at the cap the Extend fails with ErrLeaseLost.
func (c *core) moveLease(tx *link.Tx, seq int64, at time.Time) error {
	ct, _, err := c.useControl(tx)
	if err != nil || ct.max == 0 {
		return err
	}
	now, err := c.now()
	if err != nil {
		return err
	}
	if !ct.counted {
		// Count them now: a count made from the items before this write
		// would keep the lease's old end, and free its room too soon.
		if err := c.countLeases(&ct, now.UnixNano()); err != nil {
			return err
		}
	}
	live := c.sm.liveLeases(ct.leases, now.UnixNano())
	if _, held := slices.BinarySearchFunc(live, seq, func(l capLease, seq int64) int { return cmp.Compare(l.Seq, seq) }); !held && len(live) >= ct.max {
		return fmt.Errorf("queue %q: message %d: its lease ended and the queue is at its cap of %d in flight: %w", c.name, seq, ct.max, ErrLeaseLost)
	}
	_, _, err = c.setLeases(tx, ct, withLeases(live, []int64{seq}, []capLease{{Seq: seq, End: at.UnixNano()}}))
	return err
}

// sharedTries bounds the commits of one write of a shared queue on a
// *tipkv.DB that other processes keep winning.
const sharedTries = 100

// write commits f through w. A *tipkv.DB commits it alone, and after a
// failed condition runs f again at once, up to sharedTries times: the
// condition failed because another process committed first, so the queue
// has moved on and f's new reads find where (DB.Update's growing pause
// would let the winner go again and again). A *tipkv.Batch joins its
// Update, whose function runs again instead.
func (c *core) write(w tipkv.Writer, f func(*link.Tx) error) error {
	if _, ok := w.(*tipkv.DB); !ok {
		return link.Write(w, f)
	}
	for try := 1; ; try++ {
		err := link.WriteOnce(w, f)
		if err == nil || !errors.Is(err, engine.ErrConditionFailed) {
			return err
		}
		if try == sharedTries {
			return fmt.Errorf("%w: gave up after %d tries: %w", tipkv.ErrConflict, try, err)
		}
		if try > 2 {
			// Spread out writers that keep colliding, a little.
			time.Sleep(rand.N(time.Duration(min(try, 20)) * 50 * time.Microsecond))
		}
	}
}

// unclaimNow ends claims before any write was added for them: what the
// items hold is as it was.
func (c *core) unclaimNow(hs []*held) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		h.busy = false
	}
}

// heldAttempts returns the deliveries counted for the lease id names, or
// an error as claim gives it.
func (c *core) heldAttempts(id ID) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, tipkv.ErrClosed
	}
	if id.lease == 0 {
		return 0, fmt.Errorf("%w: queue %q: message %d: zero lease (messages from Peek and Pop have no lease)", tipkv.ErrInvalid, c.name, id.seq)
	}
	h := c.sm.held[id.seq]
	if h == nil || h.lease != id.lease || h.busy {
		return 0, fmt.Errorf("queue %q: message %d (id %s): %w", c.name, id.seq, id, ErrLeaseLost)
	}
	return h.attempts, nil
}
