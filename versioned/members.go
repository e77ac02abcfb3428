package versioned

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// Members of a consumer group: several instances of one consumer (the
// replicas of a service) join the group of a stream, and one of them at a
// time, the active member, holds the group's lease and moves its cursor;
// the others stand by and take the group over when the active member stops
// renewing its lease (it crashed, was killed, or left).
//
// The lease of a group lives in a key of its own beside the cursor,
//
//	lease  0A | stream | group | asc(epoch)  -> asc(deadline) | member
//
// where epoch is the fencing token: 1 for the first member that takes the
// group, one more at every takeover, never reused while the key lives
// (Leave keeps the key, with deadline 0). deadline is when the lease ends,
// Unix nanoseconds of the holder's clock, and member the holder's name
// (1 to MaxNameSize bytes). A takeover deletes the old epoch's key and
// writes the next in one batch, so a group has one lease key, and a member
// that still holds an older epoch finds its key gone. Every write of a
// member requires, as a condition of its own batch, that the key of its
// epoch is present: a member that lost the group can never move the
// cursor, on any engine, however late its write arrives.

// DefaultMemberLease is MemberOptions.Lease's default.
const DefaultMemberLease = 10 * time.Second

// MemberOptions configure a Member. A nil *MemberOptions is valid and means
// the defaults.
type MemberOptions struct {
	// Lease is how long the group stays with its active member after the
	// member took it or last renewed it. Another member takes the group
	// over once Lease has passed since the last renewal, plus the engine's
	// clock skew allowance (engine.Caps.ClockSkew: 0 on Pebble, where every
	// member shares one clock; etcdkv's and sqlkv's ClockSkew on shared
	// engines). The default is DefaultMemberLease.
	Lease time.Duration

	// RenewEvery is how often Follow renews the lease of an active member,
	// and how often a standby's Follow tries to take the group. It must be
	// below Lease. The default is Lease/3.
	RenewEvery time.Duration

	// Clock gives the time leases are measured by. The default is the DB's
	// clock (tipkv.Options.Clock).
	Clock func() time.Time
}

// Member is one member of a consumer group of a stream, as Feed.Join
// returns it. At most one member of a group is active at a time: the one
// that holds the group's lease (Acquire, or Follow, which acquires and
// renews on its own). Only the active member's Advance moves the cursor;
// a member that lost the group gets ErrLeaseLost (tipkv.ErrLeaseLost), in
// the same batch as the cursor write, on every engine.
//
// Members are told apart by name: give every instance a name of its own
// (a host name, a pod name). A member that joins under the name of the
// active member takes the group at once, in a new epoch, fencing out the
// old one: that is how a restarted instance resumes without waiting for
// its old lease to end, and why two live instances must not share a name.
//
// A member serves one (stream, group). A group's work is split among
// members by stream: the cursor is per stream, so a service that consumes
// many streams runs a member per stream in each replica, and the active
// members of different streams may sit in different replicas. Within one
// stream one member is active at a time; a stream's events are not
// divided among members.
//
// A Member is safe for concurrent use by many goroutines, but its Advances
// move one cursor: run them from one goroutine (the one Follow yields to).
// Feed.Advance on the same group bypasses the lease: do not mix the two.
// DropGroup drops the group's cursor, not its lease (one small key, which
// keeps the epoch growing if the group is used again).
type Member[T any] struct {
	f                   *Feed[T]
	stream, group, name string
	prefix              []byte // 0A | stream | group
	lease, every        time.Duration
	clock               func() time.Time
	skew                time.Duration

	mu sync.Mutex
	// epoch is the epoch of the lease the member holds, 0 when it holds
	// none; deadline when that lease ends, Unix nanoseconds.
	epoch, deadline int64
	// cursor is the group's cursor as the member last wrote or read it:
	// where its next Advance moves from.
	cursor int64
	// verify: a write of the member failed or had an unknown outcome: read
	// the lease and the cursor before the next Advance.
	verify bool
}

// Join returns member's membership of group on stream. It writes nothing:
// the member is a standby until Acquire or Follow takes the group. Names
// are 1 to MaxNameSize bytes; a bad name or option is ErrInvalid.
func (f *Feed[T]) Join(stream, group, member string, opts *MemberOptions) (*Member[T], error) {
	if err := checkGroup(stream, group); err != nil {
		return nil, err
	}
	if err := checkName("member", member); err != nil {
		return nil, fmt.Errorf("stream %q, group %q: %w", stream, group, err)
	}
	m := &Member[T]{
		f: f, stream: stream, group: group, name: member,
		prefix: leasePrefix(stream, group),
		lease:  DefaultMemberLease,
		clock:  f.w.ln.Clock,
		skew:   max(f.store.Caps().ClockSkew, 0),
	}
	if opts != nil {
		if opts.Lease < 0 || opts.RenewEvery < 0 {
			return nil, fmt.Errorf("%w: stream %q, group %q: negative Lease or RenewEvery", tipkv.ErrInvalid, stream, group)
		}
		if opts.Lease > 0 {
			m.lease = opts.Lease
		}
		m.every = opts.RenewEvery
		if opts.Clock != nil {
			m.clock = opts.Clock
		}
	}
	if m.every == 0 {
		m.every = m.lease / 3
	}
	if m.every >= m.lease {
		return nil, fmt.Errorf("%w: stream %q, group %q: RenewEvery %v is not below Lease %v", tipkv.ErrInvalid, stream, group, m.every, m.lease)
	}
	return m, nil
}

// Name returns the member's name.
func (m *Member[T]) Name() string { return m.name }

// Epoch returns the epoch (the fencing token) of the lease the member
// holds as far as it knows, 0 when it holds none. Another member may have
// taken the group over since: the member learns it at its next write.
func (m *Member[T]) Epoch() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

// Position returns the group's cursor as the member last wrote it (or read
// it when it took the group): where its next Advance moves from. It is
// meaningful while the member holds the group.
func (m *Member[T]) Position() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursor
}

// Acquire takes the group's lease, or renews it if the member holds it,
// and reports whether the member holds it now. It takes the group when no
// member ever held it, when the holder's lease ended Lease plus the
// engine's ClockSkew ago (or it left), and when the holder has the
// member's own name; a takeover starts a new epoch and reads the group's
// cursor. It returns false, and writes nothing, while another member's
// lease holds.
//
// It is one Update: a read of the lease, and a write that requires the
// lease read to be unchanged at commit (two members taking one group at
// once: one wins, the other reads again and finds it held).
func (m *Member[T]) Acquire() (bool, error) {
	m.mu.Lock()
	held := m.epoch
	m.mu.Unlock()
	var took leaseRecord
	err := link.Write(m.f.db, func(tx *link.Tx) error {
		took = leaseRecord{}
		now := m.clock().UnixNano()
		l, found, err := readLease(m.f.store, m.prefix)
		if err != nil {
			return err
		}
		next := leaseRecord{epoch: 1, deadline: now + int64(m.lease), member: m.name}
		switch {
		case !found:
			if err := tx.Batch.Require(engine.Empty(m.prefix, codec.PrefixEnd(m.prefix))); err != nil {
				return err
			}
		case l.member == m.name && l.epoch == held:
			next.epoch = l.epoch // a renewal
			if err := tx.Batch.Require(engine.Equals(l.key, l.raw)); err != nil {
				return err
			}
		case l.member == m.name || now >= l.deadline+int64(m.skew):
			next.epoch = l.epoch + 1
			if err := tx.Batch.Require(engine.Equals(l.key, l.raw)); err != nil {
				return err
			}
			if err := tx.Batch.Delete(l.key); err != nil {
				return err
			}
		default:
			return nil // held by another member
		}
		next.key = leaseKey(m.prefix, next.epoch)
		took = next
		return tx.Batch.Set(next.key, encodeLease(next.deadline, m.name))
	})
	if err != nil {
		return false, fmt.Errorf("stream %q, group %q: member %q: acquire: %w", m.stream, m.group, m.name, err)
	}
	if took.epoch == 0 {
		m.lose(held)
		return false, nil
	}
	if took.epoch == held {
		m.mu.Lock()
		if m.epoch == held {
			m.deadline = took.deadline
		}
		m.mu.Unlock()
		return true, nil
	}
	// A takeover: the group's cursor is final now (every write of an older
	// epoch requires a key this batch deleted).
	cur, err := readCursor(m.f.store, groupKey(m.stream, m.group))
	m.mu.Lock()
	m.epoch, m.deadline, m.cursor, m.verify = took.epoch, took.deadline, cur, err != nil
	m.mu.Unlock()
	if err != nil {
		return true, fmt.Errorf("stream %q, group %q: member %q: cursor: %w", m.stream, m.group, m.name, err)
	}
	return true, nil
}

// Renew extends the member's lease to Lease from now. It fails with an
// error matching ErrLeaseLost, and writes nothing, if the member holds no
// lease or another member took the group over. It writes one key, under
// the condition that the member's epoch is still the group's.
func (m *Member[T]) Renew() error {
	m.mu.Lock()
	epoch := m.epoch
	m.mu.Unlock()
	if epoch == 0 {
		return m.lostErr("renew")
	}
	var deadline int64
	err := link.WriteOnce(m.f.db, func(tx *link.Tx) error {
		deadline = m.clock().UnixNano() + int64(m.lease)
		key := leaseKey(m.prefix, epoch)
		if err := tx.Batch.Require(engine.Present(key)); err != nil {
			return err
		}
		return tx.Batch.Set(key, encodeLease(deadline, m.name))
	})
	if errors.Is(err, engine.ErrConditionFailed) {
		m.lose(epoch)
		return m.lostErr("renew")
	}
	if err != nil {
		return fmt.Errorf("stream %q, group %q: member %q: renew: %w", m.stream, m.group, m.name, err)
	}
	m.mu.Lock()
	if m.epoch == epoch {
		m.deadline = deadline
	}
	m.mu.Unlock()
	return nil
}

// Leave gives the group up: the member's lease ends now, so that a standby
// takes the group at its next try, without waiting for the lease to run
// out. It keeps the epoch (the next member's is one more). Leaving a group
// the member does not hold (any more) does nothing.
func (m *Member[T]) Leave() error {
	m.mu.Lock()
	epoch := m.epoch
	m.epoch, m.deadline = 0, 0
	m.mu.Unlock()
	if epoch == 0 {
		return nil
	}
	err := link.WriteOnce(m.f.db, func(tx *link.Tx) error {
		key := leaseKey(m.prefix, epoch)
		if err := tx.Batch.Require(engine.Present(key)); err != nil {
			return err
		}
		return tx.Batch.Set(key, encodeLease(0, m.name))
	})
	if err != nil && !errors.Is(err, engine.ErrConditionFailed) {
		return fmt.Errorf("stream %q, group %q: member %q: leave: %w", m.stream, m.group, m.name, err)
	}
	return nil
}

// memberTx is what one Tx knows of a member's Advances in it.
type memberTx struct {
	epoch int64
	at    int64 // the cursor after the Tx's Advances so far
}

// Advance moves the group's cursor from where the member left it (its
// Position) to position to, as part of w, as Feed.Advance does: pass the
// Batch of the Update that writes what the member made of the events up
// to to, and both commit or neither. The batch requires the member's
// lease to be the group's at commit: if another member took the group
// over, Advance (or the Update's commit, retried) fails with an error
// matching ErrLeaseLost and the Update writes nothing. to at or below
// the cursor is ErrConflict (ErrLeaseLost if another member holds the
// group): the events up to to were handled. That makes
// an Update whose outcome was unknown (tipkv.ErrUnknownOutcome) safe to
// send again: if the first landed, the second's Advance fails and it
// writes nothing.
//
// It reads the store only after a write of the member failed (or had an
// unknown outcome): then the lease and the cursor, once.
func (m *Member[T]) Advance(w tipkv.Writer, to int64) error {
	return link.Write(w, func(tx *link.Tx) error {
		p := tx.State(m, func() any { return &memberTx{} }).(*memberTx)
		if p.epoch == 0 {
			epoch, at, err := m.begin()
			if err != nil {
				return err
			}
			if err := tx.Batch.Require(engine.Present(leaseKey(m.prefix, epoch))); err != nil {
				return err
			}
			p.epoch, p.at = epoch, at
			tx.OnCommit(func() {
				m.mu.Lock()
				if m.epoch == p.epoch {
					m.cursor = p.at
				}
				m.mu.Unlock()
			})
			tx.OnAbort(func() {
				m.mu.Lock()
				m.verify = true
				m.mu.Unlock()
			})
		}
		var err error
		if to <= p.at {
			err = fmt.Errorf("%w: stream %q, group %q: member %q: the cursor is at %d already: the events up to %d were handled", tipkv.ErrConflict, m.stream, m.group, m.name, p.at, to)
		} else if err = m.f.advanceIn(tx, m.stream, m.group, p.at, to); err != nil {
			err = fmt.Errorf("member %q: %w", m.name, err)
		}
		if errors.Is(err, tipkv.ErrConflict) {
			// The cursor is not where the member left it: if another
			// member took the group over, say so.
			if lost := m.held(p.epoch); lost != nil {
				return lost
			}
		}
		if err != nil {
			return err
		}
		p.at = to
		return nil
	})
}

// begin returns the epoch the member holds and its cursor, reading both
// after a failed write; ErrLeaseLost when it holds none.
func (m *Member[T]) begin() (epoch, cursor int64, err error) {
	m.mu.Lock()
	epoch, cursor, verify := m.epoch, m.cursor, m.verify
	m.mu.Unlock()
	if epoch == 0 {
		return 0, 0, m.lostErr("advance")
	}
	if !verify {
		return epoch, cursor, nil
	}
	l, found, err := readLease(m.f.store, m.prefix)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %q, group %q: member %q: %w", m.stream, m.group, m.name, err)
	}
	if !found || l.epoch != epoch || l.member != m.name {
		m.lose(epoch)
		return 0, 0, m.lostErr("advance")
	}
	if cursor, err = readCursor(m.f.store, groupKey(m.stream, m.group)); err != nil {
		return 0, 0, fmt.Errorf("stream %q, group %q: member %q: %w", m.stream, m.group, m.name, err)
	}
	m.mu.Lock()
	if m.epoch == epoch {
		m.cursor, m.verify = cursor, false
	}
	m.mu.Unlock()
	return epoch, cursor, nil
}

// held reads the group's lease and returns nil if it is still the
// member's of epoch, else (or if the read fails) the error to return.
func (m *Member[T]) held(epoch int64) error {
	l, found, err := readLease(m.f.store, m.prefix)
	if err != nil {
		return fmt.Errorf("stream %q, group %q: member %q: %w", m.stream, m.group, m.name, err)
	}
	if !found || l.epoch != epoch || l.member != m.name {
		m.lose(epoch)
		return m.lostErr("advance")
	}
	return nil
}

// lose forgets the lease of epoch, if the member still thinks it holds it.
func (m *Member[T]) lose(epoch int64) {
	m.mu.Lock()
	if m.epoch == epoch && epoch != 0 {
		m.epoch, m.deadline = 0, 0
	}
	m.mu.Unlock()
}

func (m *Member[T]) lostErr(op string) error {
	return fmt.Errorf("stream %q, group %q: member %q: %s: another member holds the group: %w", m.stream, m.group, m.name, op, tipkv.ErrLeaseLost)
}

// Lease is the lease of a group's active member, as Feed.Holder reads it.
type Lease struct {
	// Member is the name of the member that holds (or last held) the
	// group.
	Member string
	// Epoch is the lease's fencing token: 1 for the group's first holder,
	// one more at every takeover.
	Epoch int64
	// Deadline is when the lease ends (UTC), by the holder's clock; the zero
	// Time when the member left. Another member may take the group over
	// once it and the engine's ClockSkew have passed.
	Deadline time.Time
}

// Holder returns the lease of group on stream: which member holds it (or
// last held it: compare Deadline with the time), ErrNotFound when no
// member ever took the group. It is one read of the group's lease keys.
func (f *Feed[T]) Holder(stream, group string) (Lease, error) {
	if err := checkGroup(stream, group); err != nil {
		return Lease{}, err
	}
	l, found, err := readLease(f.store, leasePrefix(stream, group))
	if err != nil {
		return Lease{}, fmt.Errorf("stream %q, group %q: %w", stream, group, err)
	}
	if !found {
		return Lease{}, fmt.Errorf("%w: stream %q, group %q: no member ever took the group", tipkv.ErrNotFound, stream, group)
	}
	out := Lease{Member: l.member, Epoch: l.epoch}
	if l.deadline != 0 {
		out.Deadline = time.Unix(0, l.deadline).UTC()
	}
	return out, nil
}
