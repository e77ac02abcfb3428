package tipkvwatermill

import (
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// PublisherConfig configures a Publisher. The zero value means the
// defaults.
type PublisherConfig struct {
	// Prefix starts the name of every topic's stream and every consumer
	// group's queue in the DB, so that they do not meet the application's
	// own feeds and queues. Publishers and Subscribers of one topic must
	// use the same prefix. The default is DefaultPrefix.
	Prefix string

	// Retention bounds the topics' streams by count and age, trimmed in
	// the background while the DB is open (see versioned.FeedRetention).
	// A trim never drops a message a consumer group has not moved to its
	// queue yet. An empty Retention.Streams means Prefix: every topic.
	// The default (zero) keeps every message, so that a consumer group
	// created later can read it; set a bound on a long-lived DB.
	Retention versioned.FeedRetention

	// Logger receives the publisher's logs. The default discards them.
	Logger watermill.LoggerAdapter
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Retention.Streams == "" {
		c.Retention.Streams = c.Prefix
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
	return c
}

// Defaults of SubscriberConfig.
const (
	DefaultBatchSize     = 100
	DefaultLease         = 30 * time.Second
	DefaultNackDelay     = 100 * time.Millisecond
	DefaultRetryInterval = time.Second
)

// SubscriberConfig configures a Subscriber. The zero value means the
// defaults: the consumer group "" (every Subscriber without a group
// shares it), batches of DefaultBatchSize, leases of DefaultLease, no
// attempt limit.
type SubscriberConfig struct {
	// ConsumerGroup names the group the Subscriber consumes in. Every
	// group receives every message published to the topic; the
	// subscriptions of one group, in this process and in others sharing
	// the DB's engine, share its messages, each delivered to one of them
	// at a time. "" is a group like any other. A group is created by its
	// first Subscribe or SubscribeInitialize and lives in the DB (its
	// position and its queue) until the application removes it.
	ConsumerGroup string

	// SkipHistory makes a consumer group that this Subscriber creates
	// start after the newest message of the topic, as Kafka's
	// auto.offset.reset=latest. The default (false) starts a new group at
	// the oldest message the topic keeps (see PublisherConfig.Retention),
	// as watermill-sql does: no message published before the group
	// existed is lost to it. A group that exists keeps its position
	// either way.
	SkipHistory bool

	// Replay makes every Subscribe read the topic from its oldest kept
	// message, on its own: no consumer group, nothing written to the DB,
	// Ack and Nack kept in memory (Nack delivers the message again, in
	// order). Every subscription thus receives every message, old ones
	// included, as a new Kafka consumer without a group does; after a
	// restart it starts again from the oldest. ConsumerGroup, SkipHistory,
	// BatchSize, Lease and MaxAttempts do not apply. The default is
	// false.
	Replay bool

	// BatchSize is how many messages one Receive leases from the group's
	// queue, and how many the subscription moves from the topic into the
	// queue per write; acknowledgements are committed in batches of up to
	// as many, together with the next move (see "Cost of a message" in
	// the package doc). The messages of a batch are handed to the
	// subscription's channel one at a time; those not yet handed out stay
	// leased to this subscription, so a large batch keeps them from the
	// group's other subscriptions meanwhile. The default is
	// DefaultBatchSize.
	BatchSize int

	// Lease is how long a received message stays reserved for this
	// subscription before the group may deliver it again. While the
	// subscription holds a message (in its batch, or handed out and not
	// yet acknowledged) it extends the lease by Lease every Lease/3, so a
	// slow handler keeps its message; a process that stops ends its
	// leases (on Pebble at the restart; on a shared engine when they run
	// out). The default is DefaultLease.
	Lease time.Duration

	// NackDelay is how long a nacked message waits before it is delivered
	// again (the subscription keeps it meanwhile, so later messages wait
	// too: order is kept). Negative: at once. The default is
	// DefaultNackDelay.
	NackDelay time.Duration

	// MaxAttempts, when above zero, limits the deliveries of a message
	// (counted durably, across restarts and processes): a message
	// delivered MaxAttempts times that is nacked again, or whose lease
	// runs out, moves to the group's dead-letter queue (see
	// Subscriber.Queue and queue.Queue.DeadLetters) instead of being
	// delivered again. The default (0) is no limit: a message is
	// delivered until it is acknowledged, as Watermill's Nack means; use
	// the Router's Retry and PoisonQueue middleware for a policy of your
	// own.
	MaxAttempts int

	// RetryInterval is the pause after an error of the store (a lost
	// connection to a shared engine, say) before the subscription tries
	// again. The default is DefaultRetryInterval.
	RetryInterval time.Duration

	// Prefix is PublisherConfig.Prefix; Publishers and Subscribers of one
	// topic must use the same. The default is DefaultPrefix.
	Prefix string

	// Logger receives the subscriber's logs. The default discards them.
	Logger watermill.LoggerAdapter
}

func (c SubscriberConfig) withDefaults() (SubscriberConfig, error) {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.NackDelay == 0 {
		c.NackDelay = DefaultNackDelay
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
	switch {
	case c.BatchSize < 0:
		return c, fmt.Errorf("%w: tipkvwatermill: BatchSize %d", tipkv.ErrInvalid, c.BatchSize)
	case c.Lease < 3*time.Millisecond:
		return c, fmt.Errorf("%w: tipkvwatermill: Lease %v: want at least 3ms", tipkv.ErrInvalid, c.Lease)
	case c.MaxAttempts < 0:
		return c, fmt.Errorf("%w: tipkvwatermill: MaxAttempts %d", tipkv.ErrInvalid, c.MaxAttempts)
	}
	return c, nil
}
