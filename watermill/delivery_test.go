package tipkvwatermill_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
	tipkvwatermill "github.com/tipkv/tipkv/watermill"
)

// failAfter bounds the waits of these tests: only a failing test waits
// that long.
const failAfter = 20 * time.Second

// next returns the next message of ch, failing the test if none comes.
func next(t testing.TB, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		require.True(t, ok, "the channel closed")
		return m
	case <-time.After(failAfter):
		t.Fatal("no message")
		return nil
	}
}

// closed waits until ch closes, failing the test if it does not.
func closed(t testing.TB, ch <-chan *message.Message) {
	t.Helper()
	timeout := time.After(failAfter)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return
			}
			m.Nack()
		case <-timeout:
			t.Fatal("the channel did not close")
		}
	}
}

func newPub(t testing.TB, db *tipkv.DB) *tipkvwatermill.Publisher {
	t.Helper()
	p, err := tipkvwatermill.NewPublisher(db, tipkvwatermill.PublisherConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func newSub(t testing.TB, db *tipkv.DB, cfg tipkvwatermill.SubscriberConfig) *tipkvwatermill.Subscriber {
	t.Helper()
	s, err := tipkvwatermill.NewSubscriber(db, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func subscribe(t testing.TB, s *tipkvwatermill.Subscriber, topic string) <-chan *message.Message {
	t.Helper()
	ch, err := s.Subscribe(context.Background(), topic)
	require.NoError(t, err)
	return ch
}

func msg(uuid, payload string, kv ...string) *message.Message {
	m := message.NewMessage(uuid, []byte(payload))
	for i := 0; i+1 < len(kv); i += 2 {
		m.Metadata.Set(kv[i], kv[i+1])
	}
	return m
}

// A message's UUID, metadata and payload arrive as published, and in the
// group's queue they are the message's headers and value.
func TestMessageRoundTripsThroughQueueHeaders(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	require.NoError(t, pub.Publish("orders", msg("id-1", "hello", "trace", "abc", "", "empty key")))

	sub := newSub(t, db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "billing", Lease: time.Hour})
	ch := subscribe(t, sub, "orders")
	m := next(t, ch)
	require.Equal(t, "id-1", m.UUID)
	require.Equal(t, "hello", string(m.Payload))
	require.Equal(t, message.Metadata{"trace": "abc", "": "empty key"}, m.Metadata)
	require.Equal(t, 1, tipkvwatermill.Attempts(m))
	// Close without an Ack: the message goes back to the group's queue
	// at once (the lease is an hour), where Peek shows it as stored.
	require.NoError(t, sub.Close())
	closed(t, ch)
	q, err := sub.Queue("orders")
	require.NoError(t, err)
	peeked, err := q.Peek(10)
	require.NoError(t, err)
	require.Len(t, peeked, 1)
	require.Equal(t, "hello", string(peeked[0].Value))
	require.Equal(t, queue.Headers{tipkvwatermill.UUIDHeader: "id-1", "trace": "abc", "": "empty key"}, peeked[0].Headers)
}

// What Publish refuses, it refuses whole: nothing of the call is stored.
func TestPublishRefusesWhatAQueueCannotCarry(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	big := message.NewMessage("big", make([]byte, queue.MaxValueSize+1))
	reserved := msg("r", "x", tipkvwatermill.UUIDHeader, "spoof")
	for _, bad := range []*message.Message{big, reserved, nil} {
		err := pub.Publish("t", msg("ok", "fine"), bad)
		require.ErrorIs(t, err, tipkv.ErrInvalid)
	}
	require.ErrorIs(t, pub.Publish("", msg("a", "b")), tipkv.ErrInvalid)
	sub := newSub(t, db, tipkvwatermill.SubscriberConfig{SkipHistory: false})
	require.NoError(t, pub.Publish("t", msg("after", "x")))
	m := next(t, subscribe(t, sub, "t"))
	require.Equal(t, "after", m.UUID, "no message of a refused Publish is stored")
	require.NoError(t, pub.Close())
	require.ErrorIs(t, pub.Publish("t", msg("late", "x")), tipkvwatermill.ErrPublisherClosed)
}

type order struct{ Total int }

// The outbox: a document version and its message commit in one Update,
// or neither does.
func TestPublishInUpdate(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	orders, err := versioned.NewCollection[order](db, "orders", nil)
	require.NoError(t, err)
	sub := newSub(t, db, tipkvwatermill.SubscriberConfig{})
	require.NoError(t, sub.SubscribeInitialize("order-events"))

	boom := errors.New("boom")
	err = db.Update(func(b *tipkv.Batch) error {
		if _, err := orders.Put(b, "o-1", order{Total: 10}); err != nil {
			return err
		}
		if err := pub.PublishIn(b, "order-events", msg("lost", "o-1 placed")); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	err = db.Update(func(b *tipkv.Batch) error {
		if _, err := orders.Put(b, "o-2", order{Total: 20}); err != nil {
			return err
		}
		return pub.In(b).Publish("order-events", msg("kept", "o-2 placed"))
	})
	require.NoError(t, err)

	ch := subscribe(t, sub, "order-events")
	m := next(t, ch)
	require.Equal(t, "kept", m.UUID, "the aborted Update published nothing")
	m.Ack()
	_, err = orders.Latest("o-1")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	d, err := orders.Latest("o-2")
	require.NoError(t, err)
	require.Equal(t, 20, d.Value.Total)
}

// AckIn acknowledges in the handler's Update: committed, the message is
// gone with the handler's write; aborted, neither the write nor the
// acknowledgement happened, and the message comes again.
func TestAckInUpdate(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	seen, err := versioned.NewCollection[string](db, "seen", nil)
	require.NoError(t, err)
	sub := newSub(t, db, tipkvwatermill.SubscriberConfig{NackDelay: -1})
	ch := subscribe(t, sub, "t")
	require.NoError(t, pub.Publish("t", msg("m-1", "one"), msg("m-2", "two")))

	handle := func(m *message.Message, fail bool) error {
		return db.Update(func(b *tipkv.Batch) error {
			if _, err := seen.Put(b, m.UUID, string(m.Payload)); err != nil {
				return err
			}
			if err := tipkvwatermill.AckIn(b, m); err != nil {
				return err
			}
			if fail {
				return errors.New("fail after AckIn")
			}
			return nil
		})
	}
	m := next(t, ch)
	require.Equal(t, "m-1", m.UUID)
	require.Error(t, handle(m, true))
	m.Nack()
	m = next(t, ch)
	require.Equal(t, "m-1", m.UUID, "the failed Update acknowledged nothing")
	require.Equal(t, 2, tipkvwatermill.Attempts(m))
	require.NoError(t, handle(m, false))
	m.Ack()
	m = next(t, ch)
	require.Equal(t, "m-2", m.UUID)
	require.NoError(t, handle(m, false))
	m.Ack()

	require.NoError(t, sub.Close())
	closed(t, ch)
	q, err := sub.Queue("t")
	require.NoError(t, err)
	require.Equal(t, 0, q.Len(), "both messages acknowledged, once each")
	for _, id := range []string{"m-1", "m-2"} {
		d, err := seen.Latest(id)
		require.NoError(t, err)
		require.EqualValues(t, 1, d.Version)
	}
	require.ErrorIs(t, tipkvwatermill.AckIn(db, msg("x", "y")), tipkvwatermill.ErrNotDelivered)
}

// A nacked message comes again before the messages after it, its
// deliveries counted; the others keep their count.
func TestNackRedeliversInOrder(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	sub := newSub(t, db, tipkvwatermill.SubscriberConfig{NackDelay: -1})
	ch := subscribe(t, sub, "t")
	require.NoError(t, pub.Publish("t", msg("1", ""), msg("2", ""), msg("3", "")))
	var got []string
	for len(got) < 5 {
		m := next(t, ch)
		got = append(got, fmt.Sprintf("%s#%d", m.UUID, tipkvwatermill.Attempts(m)))
		if m.UUID == "1" && tipkvwatermill.Attempts(m) < 3 {
			m.Nack()
			continue
		}
		m.Ack()
	}
	require.Equal(t, []string{"1#1", "1#2", "1#3", "2#1", "3#1"}, got)
}

// With MaxAttempts, a message that keeps failing moves to the group's
// dead-letter queue, with its UUID and metadata, and the next message
// comes; without it, redelivery has no end (tested above with 3).
func TestMaxAttemptsMovesPoisonToDeadLetters(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	sub := newSub(t, db, tipkvwatermill.SubscriberConfig{MaxAttempts: 2, NackDelay: -1})
	ch := subscribe(t, sub, "t")
	require.NoError(t, pub.Publish("t", msg("poison", "bad", "k", "v"), msg("good", "ok")))
	for i := 1; i <= 2; i++ {
		m := next(t, ch)
		require.Equal(t, "poison", m.UUID)
		require.Equal(t, i, tipkvwatermill.Attempts(m))
		m.Nack()
	}
	m := next(t, ch)
	require.Equal(t, "good", m.UUID)
	m.Ack()
	q, err := sub.Queue("t")
	require.NoError(t, err)
	var dead []queue.DeadLetter[[]byte]
	for d, err := range q.DeadLetters() {
		require.NoError(t, err)
		dead = append(dead, d)
	}
	require.Len(t, dead, 1)
	require.Equal(t, "bad", string(dead[0].Value))
	require.Equal(t, queue.Headers{tipkvwatermill.UUIDHeader: "poison", "k": "v"}, dead[0].Headers)
	require.Equal(t, 2, dead[0].Attempts)
}

// Every consumer group gets every message; a group created after
// messages were published gets them too, unless it skips history.
func TestGroupsFanOutAndStartWhereConfigured(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	require.NoError(t, pub.Publish("t", msg("old-1", ""), msg("old-2", "")))
	fromStart := newSub(t, db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "a"})
	skipping := newSub(t, db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "b", SkipHistory: true})
	chA := subscribe(t, fromStart, "t")
	chB := subscribe(t, skipping, "t")
	require.NoError(t, pub.Publish("t", msg("new", "")))
	for _, want := range []string{"old-1", "old-2", "new"} {
		m := next(t, chA)
		require.Equal(t, want, m.UUID)
		m.Ack()
	}
	m := next(t, chB)
	require.Equal(t, "new", m.UUID, "a group that skips history starts after the newest message")
	m.Ack()
	// A group that exists keeps its position: a new Subscriber of group
	// b with SkipHistory off does not go back.
	require.NoError(t, skipping.Close())
	closed(t, chB)
	again := newSub(t, db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "b"})
	chB = subscribe(t, again, "t")
	require.NoError(t, pub.Publish("t", msg("newer", "")))
	require.Equal(t, "newer", next(t, chB).UUID)
}

// A record in the topic that does not decode is passed over; the
// messages after it arrive.
func TestCorruptRecordIsPassedOver(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	raw, err := versioned.NewFeed[[]byte](db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	require.NoError(t, pub.Publish("t", msg("before", "")))
	_, err = raw.Append(db, tipkvwatermill.DefaultPrefix+"t", []byte{0x7f, 1, 2})
	require.NoError(t, err)
	require.NoError(t, pub.Publish("t", msg("after", "")))
	for _, replay := range []bool{false, true} {
		sub := newSub(t, db, tipkvwatermill.SubscriberConfig{Replay: replay})
		ch := subscribe(t, sub, "t")
		for _, want := range []string{"before", "after"} {
			m := next(t, ch)
			require.Equal(t, want, m.UUID)
			m.Ack()
		}
	}
}
