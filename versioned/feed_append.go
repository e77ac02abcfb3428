package versioned

import (
	"fmt"
	"math"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/link"
)

// The times a feed takes: positions are Unix nanoseconds, which an int64
// holds from 1677 to April 2262. Writes take times in [MinTime, MaxTime]
// and refuse others with ErrInvalid; MaxTime leaves 8.7e15 nanoseconds
// after it, so that Append, which may place an event past the last one,
// never runs out of positions.
var (
	// MinTime is the earliest time a feed writes: one nanosecond after
	// the Unix epoch (positions are >= 1).
	MinTime = time.Unix(0, 1).UTC()
	// MaxTime is the latest time a feed writes: the start of 2262 (UTC).
	MaxTime = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)

	minTime = MinTime
	maxTime = time.Unix(0, math.MaxInt64)
)

// checkTime refuses a time a feed does not write.
func checkTime(what string, t time.Time) error {
	if t.Before(MinTime) || t.After(MaxTime) {
		return fmt.Errorf("%w: %s %v, outside [%v, %v]", tipkv.ErrInvalid, what, t, MinTime, MaxTime)
	}
	return nil
}

// unixNanos is t.UnixNano clamped to [0, MaxInt64]: a time before 1970
// gives 0. Reads clamp; writes refuse what they would have to clamp.
func unixNanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return 0
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// Append writes event to stream at a new position: the clock's time in Unix
// nanoseconds, or one past the stream's last position when the clock ties
// with it or has stepped back, so that positions are unique and, per
// process, increasing. It returns the position. w is the DB or the Batch of
// a DB.Update, as for Collection.Put.
//
// The clock must read a time in [MinTime, MaxTime]; any other reading is
// ErrInvalid and writes nothing. A stream whose last event is at the last
// nanosecond an int64 holds (only older versions of tipkv could write
// one) has no position after it: Append then places events as AppendAt
// does, at the clock's time or the first free nanosecond after it.
//
// Positions are unique even across Updates that fail (a failed Append's
// position may stay unused) and across restarts (the last position is read
// back from the store). Events of concurrent Updates can commit in another
// order than their positions: a feed is ordered by time, not by commit.
//
// A position is above every position the stream ever held, trims
// included: a trim that drops the stream's newest event (Trim, TrimBefore,
// retention) stores its cut as the stream's trim mark, and the last
// position read back is the greater of the newest event and the mark. So a
// stream trimmed to empty, the DB reopened and the clock behind the
// dropped events, still gets positions past them, and a group's cursor or
// a follower at the old last position does not skip the new event. Only
// the first Append to a stream whose last position this DB does not know
// reads the store (its newest event and its mark); later ones read
// nothing.
//
// On a shared engine positions are unique across processes too: the event
// is written on the condition that its position is free, and if another
// process took it first (the same clock instant), the Append runs again
// after reading the stream's newest position. Its commit also requires no
// event above the last position its process knew of, and the trim mark
// it read: if another process appended above, or trimmed events this one
// never saw, the Append runs again above them. Positions increase per
// process, and never go back past a position another process stored
// before the Append began; processes' clocks differ, so positions of
// concurrent Appends of two processes are ordered by neither clock.
func (f *Feed[T]) Append(w tipkv.Writer, stream string, event T) (int64, error) {
	return f.append(w, stream, 0, event)
}

// AppendAt writes event to stream at time t, or if another event holds
// that nanosecond, at the first free one after it (and after the events
// appended at t before): events appended at the same time keep their
// order of appending. t must be in [MinTime, MaxTime] (after the Unix
// epoch, before 2262); any other time is ErrInvalid and writes nothing. It
// returns the position.
//
// Finding a free nanosecond in the past costs a store read per taken one,
// so AppendAt into a dense run of events (thousands of Appends within as
// many nanoseconds) is slow; a run of AppendAt calls with one time is not.
func (f *Feed[T]) AppendAt(w tipkv.Writer, stream string, t time.Time, event T) (int64, error) {
	if err := checkTime("AppendAt time", t); err != nil {
		return 0, fmt.Errorf("stream %q: %w", stream, err)
	}
	return f.append(w, stream, t.UnixNano(), event)
}

func (f *Feed[T]) append(w tipkv.Writer, stream string, at int64, event T) (int64, error) {
	if err := checkName("stream", stream); err != nil {
		return 0, err
	}
	val, err := f.codec.Append(nil, event)
	if err != nil {
		return 0, fmt.Errorf("stream %q: %w", stream, err)
	}
	if err := checkValue(val); err != nil {
		return 0, fmt.Errorf("stream %q: %w", stream, err)
	}
	var p int64
	err = link.Write(w, func(tx *link.Tx) error {
		var err error
		p, err = f.appendTx(tx, stream, at, val)
		return err
	})
	if err != nil {
		return 0, err
	}
	return p, nil
}

// appendTx writes the encoded event val to stream in tx, at a new
// position (at, or the clock's time when at is 0), and returns it.
func (f *Feed[T]) appendTx(tx *link.Tx, stream string, at int64, val []byte) (int64, error) {
	if tx.DB != f.w.ln {
		return 0, fmt.Errorf("%w: the Batch belongs to another DB", tipkv.ErrInvalid)
	}
	ft := feedTxOf(tx, f.w, f.shared)
	prefix, st := ft.lastPrefix, ft.lastSt
	if st == nil || ft.lastName != stream {
		// The Tx's last stream stays in memory while its
		// reservation is in flight; another one is pinned until
		// its own is.
		prefix = namePrefix(codec.FamilyFeed, stream)
		st = f.pos.pin(prefix)
		defer f.pos.unpin(st)
	}
	if f.shared {
		// Appends of this process to one stream commit one Tx at a
		// time, so that they do not fail each other's head guard.
		t, err := f.w.txOf(tx)
		if err != nil {
			return 0, err
		}
		if _, err := t.lock(prefix); err != nil {
			return 0, fmt.Errorf("stream %q: %w", stream, err)
		}
	}
	p, before, mark, err := st.reserve(f.store, prefix, at, f.clock)
	if err != nil {
		return 0, fmt.Errorf("stream %q: %w", stream, err)
	}
	ft.lastName, ft.lastPrefix, ft.lastSt = stream, prefix, st
	ft.res = append(ft.res, reservation{st: st, p: p})
	key := numberKey(prefix, p)
	if f.shared {
		// Another process may take the same position (the same clock
		// instant): only one commit may write it.
		if err := tx.Batch.Require(engine.Absent(key)); err != nil {
			return 0, err
		}
		if err := ft.guardHead(tx.Batch, st, prefix, before, mark); err != nil {
			return 0, err
		}
	}
	// The Update's metadata goes in the event's header (docfmt's
	// event.go); an event without it is stored as encoded.
	if err := tx.Batch.Set(key, docfmt.AppendEvent(nil, tx.Meta(), val)); err != nil {
		return 0, err
	}
	return p, nil
}
