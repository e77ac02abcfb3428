package queue

import (
	"context"
	"encoding/hex"
	"log/slog"
	"sync/atomic"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
)

// meters are one queue's counters in this process, read by DB.Metrics
// (tipkv.QueueMetrics). Atomics: the hot paths add to them without a lock.
type meters struct {
	enqueued     atomic.Uint64
	deliveries   atomic.Uint64
	redeliveries atomic.Uint64
	acks         atomic.Uint64
	deadLettered atomic.Uint64
	// dead is the number of dead letters (Pebble: counted at load, then
	// kept; a shared engine leaves it 0).
	dead atomic.Int64
}

type metersKey struct{ name string }

// register adds the queue's figures to DB.Metrics; it runs once per queue
// and DB.
func (c *core) register(reg *link.Registry) {
	link.MetersOf[tipkv.Metrics](reg).Set(metersKey{c.name}, c.fill)
}

// fill appends the queue's figures to m. On Pebble the
// gauges come from memory, under the queue's lock for a moment; on a
// shared engine, where only the store knows them, they are 0 (Stats reads
// them).
func (c *core) fill(m *tipkv.Metrics) {
	qm := tipkv.QueueMetrics{
		Name:         c.name,
		Enqueued:     c.m.enqueued.Load(),
		Deliveries:   c.m.deliveries.Load(),
		Redeliveries: c.m.redeliveries.Load(),
		Acks:         c.m.acks.Load(),
		DeadLettered: c.m.deadLettered.Load(),
		DeadLetters:  c.m.dead.Load(),
	}
	if c.sm == nil {
		qm.Gauges = true
		c.mu.Lock()
		qm.Depth = int64(c.depth())
		qm.Leased, qm.Delayed = int64(c.nleased), int64(c.nwaiting)
		c.mu.Unlock()
	}
	m.Queues = append(m.Queues, qm)
}

// depth is the number of messages in the queue, as Len counts them. The
// caller holds mu.
func (c *core) depth() int {
	n := c.live() + c.fresh
	for _, b := range c.blocks {
		if b.state == blockCommitted {
			n += int(b.n)
		}
	}
	return n
}

// delivered counts a message handed to a consumer that had been delivered
// attempts times before.
func (c *core) delivered(seq int64, attempts int) {
	c.m.deliveries.Add(1)
	if attempts > 0 {
		c.m.redeliveries.Add(1)
		if c.log.Enabled(context.Background(), slog.LevelDebug) {
			c.log.LogAttrs(context.Background(), slog.LevelDebug, "tipkv: message redelivered",
				slog.String("event", "redelivery"), slog.String("queue", c.name),
				slog.Int64("seq", seq), slog.Int("attempts", attempts+1))
		}
	}
}

// deadLettered counts and logs (at Warn) a message moved to the dead-letter
// queue; bad is why, if it was corrupt.
func (c *core) deadLettered(seq int64, attempts int, bad error) {
	c.m.deadLettered.Add(1)
	if c.sm == nil {
		c.m.dead.Add(1)
	}
	if !c.log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	reason := "max-attempts"
	if bad != nil {
		reason = "corrupt"
	}
	c.log.LogAttrs(context.Background(), slog.LevelWarn, "tipkv: message dead-lettered",
		slog.String("event", "dead-letter"), slog.String("queue", c.name),
		slog.Int64("seq", seq), slog.Int("attempts", attempts), slog.String("reason", reason))
}

// undecodable logs (at Error) a stored message that does not decode; err
// names its key.
func (c *core) undecodable(seq int64, err error) {
	c.log.LogAttrs(context.Background(), slog.LevelError, "tipkv: message does not decode",
		slog.String("event", "corrupt"), slog.String("queue", c.name),
		slog.Int64("seq", seq), slog.String("key", hex.EncodeToString(c.k.item(nil, seq))), slog.Any("error", err))
}

// leaseExpired logs (at Info) a lease that ended without an Ack: the
// message is visible again. The caller may hold mu: the logger's handler
// must not call the DB (tipkv.Options.Logger).
func (c *core) leaseExpired(seq int64, attempts int) {
	if !c.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	c.log.LogAttrs(context.Background(), slog.LevelInfo, "tipkv: lease expired",
		slog.String("event", "lease-expired"), slog.String("queue", c.name),
		slog.Int64("seq", seq), slog.Int("attempts", attempts))
}
