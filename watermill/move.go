package tipkvwatermill

import (
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// Moving messages from a topic's stream into a consumer group's queue.
// One Update reads the group's cursor, enqueues the messages after it
// (each with its UUID and metadata as headers) and advances the cursor
// past them, so each message enters the queue exactly once whatever
// crashes: the cursor's Advance requires, at commit, the position it read
// (Feed.Advance). The same Update also writes the acknowledgements the
// subscription has collected, so a steady drain costs one Update and one
// Receive per batch.

// ensure creates the group's cursor if the group does not exist yet: at
// the topic's start, or after its newest message with SkipHistory.
func (gs *groupSub) ensure() error {
	gs.g.mu.Lock()
	defer gs.g.mu.Unlock()
	err := gs.s.db.Update(func(b *tipkv.Batch) error {
		cur, err := gs.s.feed.Cursor(gs.stream, gs.cursor)
		if err != nil || cur != 0 {
			gs.position = cur
			return err
		}
		start, err := gs.start()
		if err != nil {
			return err
		}
		gs.position = start
		return gs.s.feed.Advance(b, gs.stream, gs.cursor, 0, start)
	})
	if err != nil {
		return fmt.Errorf("tipkvwatermill: topic %q, group %q: create the group: %w", gs.topic, gs.s.cfg.ConsumerGroup, err)
	}
	return nil
}

// start is where a new group's cursor starts: 1, before every position a
// Publisher writes (positions are clock times, see Feed.Append), or with
// SkipHistory the newest position of the stream. A cursor is never 0,
// which Feed.Cursor returns for a group that does not exist.
func (gs *groupSub) start() (int64, error) {
	if !gs.s.cfg.SkipHistory {
		return 1, nil
	}
	newest := int64(1)
	for ev, err := range gs.s.feed.Newest(gs.stream, tipkv.Query{Limit: 1}) {
		if err != nil {
			return 0, err
		}
		newest = max(newest, ev.Position)
	}
	return newest, nil
}

// flushAndMove writes the pending acknowledgements and moves up to
// moveMax messages into the queue, in one Update while the engine takes
// batches that large, and returns how many it moved.
func (gs *groupSub) flushAndMove() (int, error) {
	if gs.together {
		moved, err := gs.moveIn(true)
		if err == nil {
			return moved, nil
		}
		if !errors.Is(err, tipkv.ErrInvalid) && !errors.Is(err, queue.ErrLeaseLost) {
			return 0, err
		}
		if errors.Is(err, tipkv.ErrInvalid) {
			gs.together = false
			gs.s.logger.Debug("Acknowledgements and moves go in Updates of their own: the engine refused them together", gs.fields.Add(logErr(err)))
		}
	}
	if err := gs.ackPending(); err != nil {
		return 0, err
	}
	for {
		moved, err := gs.moveIn(false)
		if err == nil || !errors.Is(err, tipkv.ErrInvalid) {
			return moved, err
		}
		if gs.moveMax > 1 {
			gs.moveMax /= 2
			continue
		}
		// One message the topic holds and the queue cannot: larger than
		// what one batch of the engine takes.
		return 0, gs.skip(err)
	}
}

// moveIn runs one Update that moves up to moveMax messages, with the
// pending acknowledgements when acks is set.
func (gs *groupSub) moveIn(acks bool) (int, error) {
	gs.g.mu.Lock()
	defer gs.g.mu.Unlock()
	var moved int
	err := gs.s.db.Update(func(b *tipkv.Batch) error {
		if acks && len(gs.pending) > 0 {
			if err := gs.q.Ack(b, gs.pending...); err != nil {
				return err
			}
		}
		var err error
		moved, err = gs.move(b, gs.moveMax)
		return err
	})
	if err != nil {
		return 0, err
	}
	if acks {
		gs.pending = gs.pending[:0]
	}
	return moved, nil
}

// move enqueues, through b, up to n messages of the topic after the
// group's cursor and advances the cursor past them. A stored message that
// does not decode is logged and passed over.
func (gs *groupSub) move(b *tipkv.Batch, n int) (int, error) {
	from, err := gs.s.feed.Cursor(gs.stream, gs.cursor)
	if err != nil {
		return 0, err
	}
	to := from
	if from == 0 { // the group was removed meanwhile: create it again
		if to, err = gs.start(); err != nil {
			return 0, err
		}
	}
	moved := 0
	for ev, err := range gs.s.feed.Since(gs.stream, to, tipkv.Query{Limit: n}) {
		if err != nil {
			return 0, err
		}
		to = ev.Position
		r, err := decodeRecord(ev.Value)
		if err != nil {
			gs.s.logger.Error("Message in the topic does not decode, passed over", err, gs.fields.Add(watermill.LogFields{"position": ev.Position}))
			continue
		}
		h := make(queue.Headers, len(r.metadata)+1)
		for k, v := range r.metadata {
			h[k] = v
		}
		h[UUIDHeader] = r.uuid
		if _, err := gs.q.EnqueueWith(b, queue.EnqueueOptions{Headers: h}, r.payload); err != nil {
			return 0, err
		}
		moved++
	}
	if to != from {
		if err := gs.s.feed.Advance(b, gs.stream, gs.cursor, from, to); err != nil {
			return 0, err
		}
	}
	gs.position = to
	return moved, nil
}

// skip advances the group's cursor past the message after it, which the
// group's queue refused (cause), and logs it: the message stays in the
// topic for other groups and for inspection (versioned.Feed.Since).
func (gs *groupSub) skip(cause error) error {
	gs.g.mu.Lock()
	defer gs.g.mu.Unlock()
	return gs.s.db.Update(func(b *tipkv.Batch) error {
		from, err := gs.s.feed.Cursor(gs.stream, gs.cursor)
		if err != nil {
			return err
		}
		for ev, err := range gs.s.feed.Since(gs.stream, from, tipkv.Query{Limit: 1}) {
			if err != nil {
				return err
			}
			fields := watermill.LogFields{"position": ev.Position}
			if r, err := decodeRecord(ev.Value); err == nil {
				fields["uuid"] = r.uuid
			}
			gs.s.logger.Error("Message too large for the group's queue on this engine, passed over", cause, gs.fields.Add(fields))
			gs.position = ev.Position
			return gs.s.feed.Advance(b, gs.stream, gs.cursor, from, ev.Position)
		}
		return nil
	})
}

// ackPending writes the pending acknowledgements in Updates of up to
// ackMax, halving it when the engine refuses a batch that large. An ID
// whose lease was lost (the message ran out of lease and went to another
// subscription, or was acknowledged in a handler's Update already) is
// dropped: then the others are acknowledged one by one.
func (gs *groupSub) ackPending() error {
	for len(gs.pending) > 0 {
		n := min(gs.ackMax, len(gs.pending))
		err := gs.q.Ack(gs.s.db, gs.pending[:n]...)
		switch {
		case err == nil:
			gs.pending = gs.pending[n:]
		case errors.Is(err, tipkv.ErrInvalid) && n > 1:
			gs.ackMax = max(n/2, 1)
		case errors.Is(err, queue.ErrLeaseLost):
			for _, id := range gs.pending[:n] {
				if err := gs.q.Ack(gs.s.db, id); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
					return err
				}
			}
			gs.pending = gs.pending[n:]
		default:
			return err
		}
	}
	gs.pending = gs.pending[:0]
	return nil
}
