package versioned

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/tipkv/tipkv"
)

// Follow yields the events of the member's stream that its group has not
// handled yet, oldest first, while the member holds the group, as
// Feed.Follow does from the group's cursor. It first waits, as a standby,
// until the member takes the group (trying every RenewEvery), then renews
// the lease every RenewEvery while it yields. If the member loses the
// group (another member took it over: the lease was not renewed in time),
// Follow stops yielding, stands by again, and when it takes the group back
// resumes from the group's cursor, where the other member left it.
//
// The caller handles each event and, in the same Update, calls Advance:
//
//	for e, err := range m.Follow(ctx) {
//		if err != nil {
//			return err
//		}
//		err := db.Update(func(b *tipkv.Batch) error {
//			... // write what the event makes, into b
//			return m.Advance(b, e.Position)
//		})
//		if errors.Is(err, tipkv.ErrLeaseLost) {
//			continue // another member has the group: Follow stands by
//		}
//		if err != nil {
//			return err
//		}
//	}
//
// so that each event is handled exactly once by the group, whichever
// member handles it and whatever crashes: an Update whose member lost the
// group writes nothing.
//
// Follow ends when ctx ends, yielding ctx.Err(), when the DB closes,
// yielding an error matching ErrClosed, on a read or write error, which it
// yields, or when the caller stops. It then leaves the group (Leave), so
// that a standby takes it over without waiting for the lease to end.
func (m *Member[T]) Follow(ctx context.Context) iter.Seq2[Event[T], error] {
	return func(yield func(Event[T], error) bool) {
		defer func() { _ = m.Leave() }()
		fail := func(err error) {
			switch {
			case ctx.Err() != nil:
				yield(Event[T]{}, ctx.Err())
			case m.f.w.isClosed() || errors.Is(err, tipkv.ErrClosed):
				yield(Event[T]{}, fmt.Errorf("stream %q, group %q: member %q: follow: %w", m.stream, m.group, m.name, tipkv.ErrClosed))
			default:
				yield(Event[T]{}, err)
			}
		}
		tick := time.NewTicker(m.every)
		defer tick.Stop()
		for {
			// Stand by until the member holds the group.
			for {
				ok, err := m.Acquire()
				if err != nil {
					fail(err)
					return
				}
				if ok {
					break
				}
				select {
				case <-ctx.Done():
					fail(ctx.Err())
					return
				case <-m.f.w.closing:
					fail(tipkv.ErrClosed)
					return
				case <-tick.C:
				}
			}
			done, err := m.active(ctx, tick.C, yield)
			if done {
				if err != nil {
					fail(err)
				}
				return
			}
		}
	}
}

// active follows the stream from the member's cursor while the member
// holds the group, renewing its lease at every tick. It returns false when
// the member lost the group (Follow stands by again), and true when
// Follow ends, with the error to yield, if any.
func (m *Member[T]) active(ctx context.Context, tick <-chan time.Time, yield func(Event[T], error) bool) (bool, error) {
	epoch, from := m.Epoch(), m.Position()
	if epoch == 0 {
		return false, nil
	}
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var renewErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-fctx.Done():
				return
			case <-tick:
			}
			err := m.Renew()
			switch {
			case err == nil:
				continue
			case errors.Is(err, tipkv.ErrLeaseLost):
			default:
				// The lease holds until it ends: keep trying until then.
				if m.clock().UnixNano() < m.deadlineOf(epoch) {
					continue
				}
				mu.Lock()
				renewErr = err
				mu.Unlock()
			}
			cancel()
			return
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	for e, err := range m.f.Follow(fctx, m.stream, from) {
		if err != nil {
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
			if fctx.Err() != nil {
				break // the renewer stopped it
			}
			return true, err
		}
		if m.Epoch() != epoch {
			break // an Advance found the group taken over
		}
		if !yield(e, nil) {
			return true, nil
		}
	}
	cancel()
	wg.Wait()
	mu.Lock()
	err := renewErr
	mu.Unlock()
	if err != nil {
		return true, err
	}
	m.lose(epoch) // the renewer found it lost, or an Advance did
	return false, nil
}

// deadlineOf returns the deadline of the lease of epoch as the member
// knows it, 0 when it no longer holds that lease.
func (m *Member[T]) deadlineOf(epoch int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.epoch != epoch {
		return 0
	}
	return m.deadline
}
