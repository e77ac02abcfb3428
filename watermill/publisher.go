package tipkvwatermill

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

// Publisher publishes Watermill messages to topics of a tipkv DB: each
// message is appended to the topic's stream, from which every consumer
// group takes it. It implements message.Publisher.
//
// A Publisher is safe for concurrent use by many goroutines. It owns
// nothing but its handle: Close does not close the DB.
type Publisher struct {
	db     *tipkv.DB
	feed   *versioned.Feed[[]byte]
	prefix string
	logger watermill.LoggerAdapter
	closed atomic.Bool
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher on db, which may run on any engine
// (Pebble, etcd, PostgreSQL). With cfg.Retention set it starts the
// background trimmer of the topics' streams (one per DB and Retention,
// until the DB closes).
func NewPublisher(db *tipkv.DB, cfg PublisherConfig) (*Publisher, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: tipkvwatermill: nil DB", tipkv.ErrInvalid)
	}
	cfg = cfg.withDefaults()
	f, err := versioned.NewFeed[[]byte](db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}, Retention: cfg.Retention})
	if err != nil {
		return nil, fmt.Errorf("tipkvwatermill: new publisher: %w", err)
	}
	return &Publisher{db: db, feed: f, prefix: cfg.Prefix, logger: cfg.Logger}, nil
}

// Publish appends msgs to topic, in order, in one atomic write (synced
// unless the DB is NoSync): when it returns nil every message is durable,
// and when it returns an error none was published. On an engine whose
// batches hold fewer writes than msgs needs (etcd: 128 by default, two
// per message), the messages go in several writes, in order, and an
// error may leave the first of them published. Every consumer group
// of the topic receives every message, in the order of publishing within
// one Publish call and across the calls of one goroutine.
//
// Only a message's UUID, Metadata and Payload are stored; its context is
// not (see Features.ContextPreserved in the package doc). A message with a
// payload over queue.MaxValueSize, metadata under UUIDHeader, or a UUID
// and metadata whose encoding is over queue.MaxHeadersSize is refused with
// an error matching tipkv.ErrInvalid, and nothing is published.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if len(msgs) <= 1 {
		return p.PublishIn(p.db, topic, msgs...)
	}
	for _, m := range msgs {
		if err := checkMessage(m); err != nil {
			return err
		}
	}
	err := p.db.Update(func(b *tipkv.Batch) error { return p.PublishIn(b, topic, msgs...) })
	if errors.Is(err, tipkv.ErrInvalid) {
		// Every message is valid: the engine's batch is too small for
		// them all (etcd's holds 128 operations). Publish each half in
		// turn.
		half := len(msgs) / 2
		if err := p.Publish(topic, msgs[:half]...); err != nil {
			return err
		}
		return p.Publish(topic, msgs[half:]...)
	}
	return err
}

// PublishIn is Publish through w: a *tipkv.DB commits at once (each
// message alone), a *tipkv.Batch commits the messages with the rest of
// its DB.Update. Publishing in the Update that writes the state a message
// announces (a document version, say) is the transactional outbox without
// a relay: the state and the message commit together or not at all, and
// consumers see the message once the Update has committed (on Pebble: once
// its commit has returned). On a shared engine an Update that publishes
// may run its function again when another process published to the topic
// first (see tipkv.DB.Update): keep the function free of other side
// effects.
func (p *Publisher) PublishIn(w tipkv.Writer, topic string, msgs ...*message.Message) error {
	if p.closed.Load() {
		return ErrPublisherClosed
	}
	stream, err := streamName(p.prefix, topic)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := checkMessage(m); err != nil {
			return err
		}
	}
	var buf []byte
	for _, m := range msgs {
		buf = appendRecord(buf[:0], m)
		if _, err := p.feed.Append(w, stream, buf); err != nil {
			return fmt.Errorf("tipkvwatermill: publish %s to %q: %w", m.UUID, topic, err)
		}
	}
	return nil
}

// In returns a message.Publisher whose Publish is PublishIn(w, ...): give
// it to code that takes a Publisher (a CQRS event bus built per
// transaction, say) inside an Update. Its Close does nothing.
func (p *Publisher) In(w tipkv.Writer) message.Publisher { return inPublisher{p: p, w: w} }

type inPublisher struct {
	p *Publisher
	w tipkv.Writer
}

func (ip inPublisher) Publish(topic string, msgs ...*message.Message) error {
	return ip.p.PublishIn(ip.w, topic, msgs...)
}

func (inPublisher) Close() error { return nil }

// Close makes later Publish calls fail with ErrPublisherClosed. Publish
// calls already running finish. It never fails and may be called more
// than once.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	return nil
}
