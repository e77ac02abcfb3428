package tipkvwatermill

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// A group is what the subscriptions of one consumer group on one topic in
// this process share: the lock that makes their moves from the topic into
// the group's queue take turns, so that they never race each other's
// cursor (another process's moves are kept apart by the cursor's
// condition at commit instead).
type group struct {
	key  groupKey
	mu   sync.Mutex
	refs int // guarded by groupsMu
}

type groupKey struct {
	db    *tipkv.DB
	queue string // the group's queue name: prefix, topic and group
}

var (
	groupsMu sync.Mutex
	groups   = map[groupKey]*group{}
)

func acquireGroup(k groupKey) *group {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	g := groups[k]
	if g == nil {
		g = &group{key: k}
		groups[k] = g
	}
	g.refs++
	return g
}

func (g *group) release() {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	if g.refs--; g.refs == 0 {
		delete(groups, g.key)
	}
}

// groupSub is one subscription of a consumer group. Its goroutine (run)
// owns every field.
type groupSub struct {
	*subscription
	g      *group
	q      *queue.Queue[[]byte]
	cursor string // the group's cursor name on the stream

	// buf holds the messages leased and not yet handed out, by Seq;
	// current is the one handed out, until its Ack or Nack.
	buf     []queue.Message[[]byte]
	current *queue.Message[[]byte]
	// pending are the IDs of messages acknowledged by the handler and not
	// yet by the store.
	pending []queue.ID
	// position is the group's cursor as the last move read or wrote it.
	position int64

	// together: acknowledgements and moves share one Update; moveMax and
	// ackMax bound each. An engine whose batches hold less (etcd: 128
	// operations by default) refuses a batch with tipkv.ErrInvalid, and
	// they come apart and shrink.
	together        bool
	moveMax, ackMax int
}

func (s *Subscriber) openGroup(topic, stream string) (*groupSub, error) {
	q, err := s.openQueue(topic)
	if err != nil {
		return nil, err
	}
	return &groupSub{
		subscription: &subscription{s: s, topic: topic, stream: stream},
		g:            acquireGroup(groupKey{db: s.db, queue: q.Name()}),
		q:            q,
		cursor:       cursorName(s.cfg.ConsumerGroup),
		together:     true,
		moveMax:      s.cfg.BatchSize,
		ackMax:       s.cfg.BatchSize,
	}, nil
}

// run is the subscription's goroutine: move messages from the topic into
// the group's queue, lease a batch, hand its messages out one by one,
// collect the acknowledgements, and write them with the next move.
func (gs *groupSub) run() {
	defer gs.end()
	defer gs.g.release()
	defer gs.finish()
	cfg := gs.s.cfg
	for !gs.stopped() {
		moved, err := gs.flushAndMove()
		if err != nil {
			if gs.failed("move messages into the group's queue", err) {
				return
			}
			continue
		}
		msgs, err := gs.q.Receive(cfg.BatchSize, cfg.Lease)
		if err != nil && errors.Is(err, tipkv.ErrCorrupt) {
			// Moved to the dead letters by Receive; the others came.
			gs.s.logger.Error("Message does not decode, moved to the group's dead-letter queue", err, gs.fields)
			err = nil
		}
		if err != nil {
			if gs.failed("receive", err) {
				return
			}
			continue
		}
		if len(msgs) == 0 {
			if moved == 0 {
				gs.wait()
			}
			continue
		}
		gs.buf = msgs
		for len(gs.buf) > 0 && !gs.stopped() {
			m := gs.buf[0]
			gs.buf = gs.buf[1:]
			if !gs.deliver(m) {
				return
			}
		}
	}
}

// failed logs err and pauses for RetryInterval; it returns true when the
// subscription has ended (the DB closed, or the pause was cut short).
func (gs *groupSub) failed(what string, err error) bool {
	if errors.Is(err, tipkv.ErrClosed) || gs.stopped() {
		return true
	}
	gs.s.logger.Error("Cannot "+what+", retrying", err, gs.fields)
	return !gs.pause(gs.s.cfg.RetryInterval, nil, 0)
}

// deliver hands m out until it is acknowledged, delivering it again after
// each Nack. It returns false when the subscription ends first.
func (gs *groupSub) deliver(m queue.Message[[]byte]) bool {
	cfg := gs.s.cfg
	gs.current = &m // released by finish if the subscription ends before its Ack
	d := &delivery{q: gs.q, id: m.ID, attempts: m.Attempts}
	wm := toMessage(m)
	ctx, cancel := context.WithCancel(context.WithValue(gs.ctx, deliveryKey{}, d))
	wm.SetContext(ctx)
	acked, ok := gs.handOut(wm, gs.extend, cfg.Lease/3)
	cancel()
	if !ok {
		return false
	}
	if acked {
		gs.current = nil
		if !d.ackedIn.Load() {
			gs.pending = append(gs.pending, m.ID)
		}
		return true
	}
	// Nacked: keep the lease for NackDelay, then give the message back
	// and take the oldest visible one (this one, unless another
	// subscription of the group took it), counting the delivery.
	if !gs.pause(cfg.NackDelay, gs.extend, cfg.Lease/3) {
		return false
	}
	gs.current = nil
	if err := gs.q.Release(m.ID, 0); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
		if errors.Is(err, tipkv.ErrClosed) {
			return false
		}
		gs.s.logger.Error("Cannot release a nacked message", err, gs.fields)
	}
	ms, err := gs.q.Receive(1, cfg.Lease)
	if err != nil && !errors.Is(err, tipkv.ErrCorrupt) {
		if gs.failed("receive again", err) {
			return false
		}
	}
	for _, m := range ms {
		i, _ := slices.BinarySearchFunc(gs.buf, m.Seq, func(a queue.Message[[]byte], seq int64) int { return cmpInt(a.Seq, seq) })
		gs.buf = slices.Insert(gs.buf, i, m)
	}
	return true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// extend renews the leases of the messages the subscription holds: the
// one handed out and the rest of its batch, logging each renewal at Trace
// level ("Lease extended", with the message's uuid). A buffered message
// whose lease was lost (it ran out and another subscription took it) is
// dropped from the batch.
func (gs *groupSub) extend() {
	lease := gs.s.cfg.Lease
	if m := gs.current; m != nil {
		switch err := gs.q.Extend(m.ID, lease); {
		case err == nil:
			gs.extended(*m, lease)
		case errors.Is(err, queue.ErrLeaseLost):
			// Acknowledged by AckIn already, or the lease ran out before
			// this tick (the Ack will say so).
			gs.s.logger.Debug("Lease of the message handed out is gone", gs.fields.Add(logErr(err)))
		case err != nil && !errors.Is(err, tipkv.ErrClosed):
			gs.s.logger.Info("Cannot extend the lease of the message handed out", gs.fields.Add(logErr(err)))
		}
	}
	kept := gs.buf[:0]
	for _, m := range gs.buf {
		err := gs.q.Extend(m.ID, lease)
		switch {
		case err == nil:
			gs.extended(m, lease)
		case errors.Is(err, queue.ErrLeaseLost):
			continue
		case !errors.Is(err, tipkv.ErrClosed):
			gs.s.logger.Info("Cannot extend a lease", gs.fields.Add(logErr(err)))
		}
		kept = append(kept, m)
	}
	clear(gs.buf[len(kept):])
	gs.buf = kept
}

// extended logs a renewed lease at Trace level.
func (gs *groupSub) extended(m queue.Message[[]byte], lease time.Duration) {
	gs.s.logger.Trace("Lease extended", gs.fields.Add(watermill.LogFields{"uuid": m.Headers[UUIDHeader], "lease": lease}))
}

// finish runs when the subscription ends: acknowledgements not yet
// written are written, and the messages held are released to the group
// at once (unless the DB closed, which ends every lease anyway on
// Pebble, and leaves them to run out on a shared engine).
func (gs *groupSub) finish() {
	select {
	case <-gs.s.db.Done():
		return
	default:
	}
	if err := gs.ackPending(); err != nil && !errors.Is(err, tipkv.ErrClosed) {
		gs.s.logger.Error("Cannot acknowledge at the end of the subscription", err, gs.fields)
	}
	held := gs.buf
	if gs.current != nil {
		held = append(held, *gs.current)
	}
	for _, m := range held {
		if err := gs.q.Release(m.ID, 0); err != nil && !errors.Is(err, queue.ErrLeaseLost) && !errors.Is(err, tipkv.ErrClosed) {
			gs.s.logger.Error("Cannot release a message at the end of the subscription", err, gs.fields)
		}
	}
	gs.buf, gs.current = nil, nil
}

// wait blocks until the group's queue may have a visible message (a
// release, a lease that ran out, another subscription's move) or the
// topic a message after the group's cursor, or the subscription ends.
func (gs *groupSub) wait() {
	ctx, cancel := context.WithCancel(gs.ctx)
	woke := make(chan struct{}, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = gs.q.Wait(ctx)
		woke <- struct{}{}
	}()
	go func() {
		defer wg.Done()
		for range gs.s.feed.Follow(ctx, gs.stream, gs.position) {
			break
		}
		woke <- struct{}{}
	}()
	select {
	case <-woke:
	case <-gs.ctx.Done():
	}
	cancel()
	wg.Wait()
}

// toMessage is the Watermill message a queue message carries.
func toMessage(m queue.Message[[]byte]) *message.Message {
	wm := message.NewMessage(m.Headers[UUIDHeader], m.Value)
	for k, v := range m.Headers {
		if k != UUIDHeader {
			wm.Metadata[k] = v
		}
	}
	return wm
}

func logErr(err error) watermill.LogFields { return watermill.LogFields{"err": err} }
