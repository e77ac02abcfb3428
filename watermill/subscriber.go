package tipkvwatermill

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Subscriber consumes the topics of a tipkv DB in one consumer group
// (SubscriberConfig.ConsumerGroup), or each subscription on its own from
// the topic's oldest message (SubscriberConfig.Replay). It implements
// message.Subscriber and message.SubscribeInitializer.
//
// A Subscriber is safe for concurrent use by many goroutines. It owns
// nothing but its subscriptions: Close ends them and does not close the
// DB; closing the DB ends them too.
type Subscriber struct {
	db     *tipkv.DB
	cfg    SubscriberConfig
	feed   *versioned.Feed[[]byte]
	logger watermill.LoggerAdapter

	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed by Close
	wg      sync.WaitGroup
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

// NewSubscriber returns a Subscriber on db, which may run on any engine
// (Pebble, etcd, PostgreSQL). cfg's values out of range (a negative
// BatchSize or MaxAttempts, a Lease under 3ms) are tipkv.ErrInvalid.
func NewSubscriber(db *tipkv.DB, cfg SubscriberConfig) (*Subscriber, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: tipkvwatermill: nil DB", tipkv.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	f, err := versioned.NewFeed[[]byte](db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		return nil, fmt.Errorf("tipkvwatermill: new subscriber: %w", err)
	}
	return &Subscriber{db: db, cfg: cfg, feed: f, logger: cfg.Logger, closing: make(chan struct{})}, nil
}

// Subscribe returns a channel of the messages of topic, for this
// Subscriber's consumer group, creating the group if it does not exist
// (see SubscriberConfig.ConsumerGroup and SkipHistory; in Replay mode,
// the topic from its oldest message).
//
// The channel delivers one message at a time: the next comes once the
// last was acknowledged (Ack) or, after NackDelay, again if it was nacked
// (Nack). Messages come in the order they were published, for one
// subscription of the group; with several subscriptions in the group
// each gets its own share, in order within each batch. The channel
// closes when ctx ends, when the Subscriber closes, or when the DB
// closes; a message handed out and not acknowledged by then is released
// to the group at once (its context is cancelled), and acknowledgements
// not yet written are written first (unless the DB closed).
//
// A message's context (msg.Context) carries ctx's values and ends when
// the message is acknowledged or nacked, or the subscription ends.
// Delivery is at least once: see "Delivery" in the package doc.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	stream, err := streamName(s.cfg.Prefix, topic)
	if err != nil {
		return nil, err
	}
	var gs *groupSub
	if !s.cfg.Replay {
		if gs, err = s.openGroup(topic, stream); err != nil {
			return nil, err
		}
		if err := gs.ensure(); err != nil {
			gs.g.release()
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		if gs != nil {
			gs.g.release()
		}
		return nil, ErrSubscriberClosed
	}
	sub := s.newSubscription(ctx, topic, stream)
	s.wg.Add(1)
	if gs != nil {
		gs.subscription = sub
		go gs.run()
	} else {
		go (&replaySub{subscription: sub}).run()
	}
	return sub.out, nil
}

// SubscribeInitialize creates the consumer group of topic if it does not
// exist, as Subscribe would, without subscribing: from then on the group
// holds every message published to the topic (and keeps the topic's
// Retention from dropping them) until it consumes them. In Replay mode
// it does nothing.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	stream, err := streamName(s.cfg.Prefix, topic)
	if err != nil {
		return err
	}
	if s.cfg.Replay {
		return nil
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrSubscriberClosed
	}
	gs, err := s.openGroup(topic, stream)
	if err != nil {
		return err
	}
	defer gs.g.release()
	return gs.ensure()
}

// Queue returns the queue of this Subscriber's consumer group on topic:
// the messages the group has taken from the topic and not yet consumed,
// each with its payload as Value and its UUID and metadata as Headers
// (under UUIDHeader and the metadata's keys), and the group's dead
// letters (queue.Queue.DeadLetters, Requeue, Discard). Use it to inspect
// a group, and to handle the messages MaxAttempts sent there. In Replay
// mode there is no queue: tipkv.ErrInvalid.
func (s *Subscriber) Queue(topic string) (*queue.Queue[[]byte], error) {
	if s.cfg.Replay {
		return nil, fmt.Errorf("%w: tipkvwatermill: a Replay subscriber has no queue", tipkv.ErrInvalid)
	}
	if _, err := streamName(s.cfg.Prefix, topic); err != nil {
		return nil, err
	}
	return s.openQueue(topic)
}

func (s *Subscriber) openQueue(topic string) (*queue.Queue[[]byte], error) {
	name, err := queueName(s.cfg.Prefix, topic, s.cfg.ConsumerGroup)
	if err != nil {
		return nil, err
	}
	attempts := -1 // no limit
	if s.cfg.MaxAttempts > 0 {
		attempts = s.cfg.MaxAttempts
	}
	q, err := queue.Open(s.db, name, &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: attempts})
	if err != nil {
		return nil, fmt.Errorf("tipkvwatermill: topic %q, group %q: %w", topic, s.cfg.ConsumerGroup, err)
	}
	return q, nil
}

// Close ends every subscription, as Subscribe describes, and waits until
// they have ended: their channels are closed when it returns. Later
// Subscribe calls fail with ErrSubscriberClosed. It returns nil, also when
// called again.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// subscription is what every Subscribe call's goroutine has, in either
// mode.
type subscription struct {
	s      *Subscriber
	topic  string
	stream string
	out    chan *message.Message
	// ctx ends when the Subscribe's ctx ends, the Subscriber closes or
	// the DB closes; every message's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	fields watermill.LogFields
}

func (s *Subscriber) newSubscription(ctx context.Context, topic, stream string) *subscription {
	sctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.closing:
		case <-s.db.Done():
		case <-sctx.Done():
		}
		cancel()
	}()
	fields := watermill.LogFields{"topic": topic}
	if !s.cfg.Replay {
		fields["consumer_group"] = s.cfg.ConsumerGroup
	}
	return &subscription{s: s, topic: topic, stream: stream, out: make(chan *message.Message), ctx: sctx, cancel: cancel, fields: fields}
}

// end closes the channel and tells Close the subscription is over.
func (sub *subscription) end() {
	sub.cancel()
	close(sub.out)
	sub.s.wg.Done()
}

// handOut gives wm to the subscription's channel and waits until it is
// acknowledged or nacked; it calls tick every interval meanwhile (when
// tick is not nil). It returns false when the subscription ends first,
// unless the message was acknowledged or nacked by then.
func (sub *subscription) handOut(wm *message.Message, tick func(), interval time.Duration) (acked, ok bool) {
	var tc <-chan time.Time
	if tick != nil {
		t := time.NewTicker(interval)
		defer t.Stop()
		tc = t.C
	}
	for sent := false; !sent; {
		select {
		case sub.out <- wm:
			sent = true
		case <-tc:
			tick()
		case <-sub.ctx.Done():
			return false, false
		}
	}
	for {
		select {
		case <-wm.Acked():
			return true, true
		case <-wm.Nacked():
			return false, true
		case <-tc:
			tick()
		case <-sub.ctx.Done():
			// An Ack or Nack made before the subscription ended counts,
			// whichever case select picked: Close after Ack must not
			// redeliver the message.
			select {
			case <-wm.Acked():
				return true, true
			case <-wm.Nacked():
				return false, true
			default:
				return false, false
			}
		}
	}
}

// pause waits d, calling tick every interval meanwhile. It returns false
// when the subscription ends first.
func (sub *subscription) pause(d time.Duration, tick func(), interval time.Duration) bool {
	if d <= 0 {
		return sub.ctx.Err() == nil
	}
	var tc <-chan time.Time
	if tick != nil {
		t := time.NewTicker(interval)
		defer t.Stop()
		tc = t.C
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return true
		case <-tc:
			tick()
		case <-sub.ctx.Done():
			return false
		}
	}
}

// stopped reports whether the subscription has ended.
func (sub *subscription) stopped() bool { return sub.ctx.Err() != nil }
