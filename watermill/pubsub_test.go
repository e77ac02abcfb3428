package tipkvwatermill_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	tipkvwatermill "github.com/tipkv/tipkv/watermill"
)

// groupFeatures describe a consumer group Subscriber truthfully: groups
// fan out, one subscription receives in publishing order, messages
// outlive the Publisher and Subscriber that handled them, delivery is at
// least once (a crash or a lost lease delivers again), a new subscription
// of an existing group does not receive what the group consumed, and the
// context of a published message is not stored.
var groupFeatures = tests.Features{
	ConsumerGroups:                      true,
	ExactlyOnceDelivery:                 false,
	GuaranteedOrder:                     true,
	GuaranteedOrderWithSingleSubscriber: true,
	Persistent:                          true,
	RequireSingleInstance:               false,
	NewSubscriberReceivesOldMessages:    false,
	ContextPreserved:                    false,
}

// replayFeatures describe a Replay Subscriber: every subscription reads
// the topic from its oldest message, so a new one receives old messages;
// there are no consumer groups.
var replayFeatures = tests.Features{
	ConsumerGroups:                      false,
	ExactlyOnceDelivery:                 false,
	GuaranteedOrder:                     true,
	GuaranteedOrderWithSingleSubscriber: true,
	Persistent:                          true,
	NewSubscriberReceivesOldMessages:    true,
}

// testSubscriberConfig is the Subscriber configuration of the suites: the
// defaults, with a short NackDelay so that the suite's hundreds of Nacks
// do not take minutes.
func testSubscriberConfig(group string) tipkvwatermill.SubscriberConfig {
	return tipkvwatermill.SubscriberConfig{ConsumerGroup: group, NackDelay: time.Millisecond}
}

// runSuite runs Watermill's universal tests with every Publisher and
// Subscriber on a DB that open returns (the same DB, or another handle on
// the same store, as another process would have).
func runSuite(t *testing.T, features tests.Features, open func(t *testing.T) *tipkv.DB, replay bool) {
	pubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		db := open(t)
		pub, err := tipkvwatermill.NewPublisher(db, tipkvwatermill.PublisherConfig{})
		require.NoError(t, err)
		cfg := testSubscriberConfig(group)
		cfg.Replay = replay
		sub, err := tipkvwatermill.NewSubscriber(db, cfg)
		require.NoError(t, err)
		return pub, sub
	}
	tests.TestPubSub(t, features,
		func(t *testing.T) (message.Publisher, message.Subscriber) { return pubSub(t, "") },
		pubSub,
	)
}

// sameDB returns an open that gives every caller db.
func sameDB(db *tipkv.DB) func(*testing.T) *tipkv.DB {
	return func(*testing.T) *tipkv.DB { return db }
}

func TestPubSubPebbleInMemory(t *testing.T) {
	runSuite(t, groupFeatures, sameDB(openMem(t)), false)
}

func TestPubSubPebbleOnDisk(t *testing.T) {
	db, err := tipkv.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	runSuite(t, groupFeatures, sameDB(db), false)
}

func TestPubSubReplay(t *testing.T) {
	runSuite(t, replayFeatures, sameDB(openMem(t)), true)
}

// openMem opens an in-memory DB, closed when the test ends.
func openMem(t testing.TB) *tipkv.DB {
	t.Helper()
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
