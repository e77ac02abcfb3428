package tipkvwatermill_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	tipkvwatermill "github.com/tipkv/tipkv/watermill"
)

// A handler that runs longer than the lease keeps its message: the
// subscription extends the lease while it holds it, so the group's other
// subscription does not receive it meanwhile.
//
// The DB runs on a clock the test moves (tipkv.Options.Clock). The
// subscription renews its lease every Lease/3 of wall time, each time to
// Lease past the DB's now. The test moves the clock half a lease at a
// time and after each move waits for a renewal that read the new time
// (its "Lease extended" Trace log), so the lease holds at every moment of
// the DB's clock however slowly the machine runs the subscription; after
// three moves the clock is half a lease past the end of the first lease.
// A message published then is the next one the other subscription
// receives: had the slow one's lease ended, it would come first (a group
// delivers oldest first). Without the renewals the test fails, waiting for
// the first one; with renewals that did not move the lease, at the probe.
func TestLeaseIsExtendedWhileTheHandlerRuns(t *testing.T) {
	clock := &testClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, Clock: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	pub := newPub(t, db)
	const lease = 30 * time.Millisecond // a renewal every 10 ms of wall time
	renewed := &renewals{uuid: "slow", changed: make(chan struct{})}
	a := subscribe(t, newSub(t, db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "g", Lease: lease, Logger: renewed}), "t")
	require.NoError(t, pub.Publish("t", msg("slow", "")))
	m := next(t, a)
	b := subscribe(t, newSub(t, db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "g", Lease: lease}), "t")
	for range 3 {
		clock.Add(lease / 2)
		queue.Wake(db)
		// The renewal logged first after this point may have read the
		// clock before the move; the one after it started later.
		renewed.waitFor(t, renewed.count()+2)
	}
	require.NoError(t, pub.Publish("t", msg("probe", "")))
	probe := next(t, b)
	require.Equal(t, "probe", probe.UUID, "the other subscription received the slow message 1.5 leases after its delivery")
	probe.Ack()
	m.Ack()
	select {
	case x := <-a:
		t.Fatalf("the acknowledged slow message was delivered again: %s", x.UUID)
	case x := <-b:
		t.Fatalf("the acknowledged slow message was delivered again: %s", x.UUID)
	default:
	}
}

// testClock is a DB clock that moves only when the test moves it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// renewals is a Subscriber's logger that counts the renewals of the lease
// of one message (its "Lease extended" Trace logs).
type renewals struct {
	watermill.NopLogger
	uuid    string
	mu      sync.Mutex
	n       int
	changed chan struct{} // closed and replaced at every renewal
}

func (r *renewals) Trace(msg string, fields watermill.LogFields) {
	if msg != "Lease extended" || fields["uuid"] != r.uuid {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *renewals) With(watermill.LogFields) watermill.LoggerAdapter { return r }

func (r *renewals) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// waitFor waits until n renewals were logged.
func (r *renewals) waitFor(t testing.TB, n int) {
	t.Helper()
	timeout := time.After(failAfter)
	for {
		r.mu.Lock()
		got, ch := r.n, r.changed
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("the lease of the message handed out was renewed %d times, not %d, in %v", got, n, failAfter)
		}
	}
}

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
