package tipkvwatermill_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	tipkvwatermill "github.com/tipkv/tipkv/watermill"
)

// A handler that runs longer than the lease keeps its message: the
// subscription extends the lease while it holds it, so the group's other
// subscription does not receive it meanwhile.
//
// Leases are extended on a wall-clock ticker, so this test watches a
// window of wall time, 1.5 leases, with wide margins both ways: without
// the extension the lease runs out after 3s and the other subscription,
// asleep until then, takes the message within the window unless it is
// held up 1.5s; with it, a renewal comes every second, and only a stall
// of 2s between two of them lets the lease run out.
func TestLeaseIsExtendedWhileTheHandlerRuns(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	cfg := tipkvwatermill.SubscriberConfig{ConsumerGroup: "g", Lease: 3 * time.Second}
	a := subscribe(t, newSub(t, db, cfg), "t")
	require.NoError(t, pub.Publish("t", msg("slow", "")))
	m := next(t, a)
	b := subscribe(t, newSub(t, db, cfg), "t")
	select {
	case other := <-b:
		t.Fatalf("the group delivered %s again while the handler held it", other.UUID)
	case <-time.After(cfg.Lease * 3 / 2):
	}
	m.Ack()
	require.NoError(t, pub.Publish("t", msg("next", "")))
	var got *received
	select {
	case x := <-a:
		got = &received{x.UUID}
		x.Ack()
	case x := <-b:
		got = &received{x.UUID}
		x.Ack()
	case <-time.After(failAfter):
		t.Fatal("no message after the Ack")
	}
	require.Equal(t, "next", got.uuid, "the slow message was acknowledged once")
}

type received struct{ uuid string }

// Close writes the acknowledgements collected and gives back the message
// handed out at once, ending its context: the next subscription of the
// group receives that one message, and none of the acknowledged ones.
func TestCloseWritesAcksAndReleasesHeldMessages(t *testing.T) {
	db := openMem(t)
	pub := newPub(t, db)
	cfg := tipkvwatermill.SubscriberConfig{Lease: time.Hour}
	sub := newSub(t, db, cfg)
	ch := subscribe(t, sub, "t")
	require.NoError(t, pub.Publish("t", msg("1", ""), msg("2", ""), msg("3", ""), msg("4", "")))
	next(t, ch).Ack()
	next(t, ch).Ack()
	held := next(t, ch)
	require.Equal(t, "3", held.UUID)
	require.NoError(t, sub.Close())
	closed(t, ch)
	select {
	case <-held.Context().Done():
	default:
		t.Fatal("the context of the message handed out did not end with Close")
	}
	_, err := sub.Subscribe(context.Background(), "t")
	require.ErrorIs(t, err, tipkvwatermill.ErrSubscriberClosed)

	ch = subscribe(t, newSub(t, db, cfg), "t")
	m := next(t, ch)
	require.Equal(t, "3", m.UUID, "acknowledged messages are not delivered again; the held one is, before its hour-long lease ends")
	require.Equal(t, 2, tipkvwatermill.Attempts(m))
	m.Ack()
	require.Equal(t, "4", next(t, ch).UUID)
}

// Closing the DB ends every subscription at once (DB.Done), in either
// mode, and the Subscriber's Close still returns nil.
func TestDBCloseEndsSubscriptions(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	group, err := tipkvwatermill.NewSubscriber(db, tipkvwatermill.SubscriberConfig{})
	require.NoError(t, err)
	replay, err := tipkvwatermill.NewSubscriber(db, tipkvwatermill.SubscriberConfig{Replay: true})
	require.NoError(t, err)
	pub, err := tipkvwatermill.NewPublisher(db, tipkvwatermill.PublisherConfig{})
	require.NoError(t, err)
	require.NoError(t, pub.Publish("t", msg("1", "")))
	chs := []<-chan *message.Message{subscribe(t, group, "t"), subscribe(t, group, "idle"), subscribe(t, replay, "t"), subscribe(t, replay, "idle")}
	held := next(t, chs[0])
	require.NoError(t, db.Close())
	for _, ch := range chs {
		closed(t, ch)
	}
	<-held.Context().Done()
	require.NoError(t, group.Close())
	require.NoError(t, replay.Close())
	_, err = group.Subscribe(context.Background(), "t")
	require.ErrorIs(t, err, tipkv.ErrClosed)
}
