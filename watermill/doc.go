// Package tipkvwatermill is a Watermill Pub/Sub (github.com/ThreeDotsLabs/watermill)
// backed by a tipkv DB on any engine: Pebble inside the process, or etcd
// and PostgreSQL shared by several processes. Watermill's Router, its
// middleware, CQRS and the rest run on it as on any other Pub/Sub, and it
// passes Watermill's universal test suite (pubsub/tests.TestPubSub) with
// the features listed under "Features".
//
//	pub, _ := tipkvwatermill.NewPublisher(db, tipkvwatermill.PublisherConfig{})
//	sub, _ := tipkvwatermill.NewSubscriber(db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "mailer"})
//	_ = pub.Publish("signups", message.NewMessage(watermill.NewUUID(), payload))
//	msgs, _ := sub.Subscribe(ctx, "signups") // a Router does this for you
//
// What it adds to Watermill is the transactional outbox without a relay:
// Publisher.PublishIn writes messages in the caller's DB.Update, beside the
// documents they announce, and AckIn acknowledges a message in the
// handler's Update, beside what the handler wrote.
//
// # Topics, consumer groups and why they are mapped this way
//
// A topic is a feed stream (package versioned): Publish appends each
// message to it, once, whatever groups exist. A consumer group is a named
// cursor on that stream (Feed.Advance) and a queue of its own (package
// queue). A subscription of the group moves messages from the stream into
// the group's queue (one Update enqueues a batch and advances the cursor
// past it, so each message enters the queue once, whatever crashes), and
// leases them from the queue for delivery (Receive, Ack, leases,
// attempts, dead letters).
//
// The alternative was a queue per group and nothing else, with Publish
// enqueueing each message into the queue of every group. It costs one
// write less per batch, but Publish must then know which groups exist: it
// reads a registry of groups in every Update that publishes (on a shared
// engine, a condition on that registry in every such Update, which every
// new group then makes fail), a group that subscribes later never sees
// what was published before it existed, and a new subscriber cannot read
// old messages at all. With the stream, Publish writes one key and reads
// nothing, a message is stored once however many groups read it, a group
// created later starts at the oldest message the topic keeps (or, with
// SkipHistory, after the newest), a subscriber in Replay mode reads the
// stream itself from its start, and retention (PublisherConfig.Retention)
// never drops a message a group has not taken. The queue, for its part,
// gives each group what a cursor alone cannot: competing consumers within
// the group, across processes, each message leased to one of them at a
// time, acknowledged one by one and in any order, delivered again when
// its lease runs out, and counted for MaxAttempts.
//
// # Keys
//
// Names in the DB, for a topic t and a group g under the prefix p
// (DefaultPrefix, "watermill/", unless configured):
//
//	topic          feed stream  p + t                         (versioned.Feed)
//	group cursor   cursor       "g/" + g on the topic's stream  (Feed.Cursor, Lag)
//	group queue    queue        p + len(t) + ":" + t + "/" + g  (Subscriber.Queue)
//
// So "orders" with group "billing" is the stream "watermill/orders", the
// cursor "g/billing" and the queue "watermill/6:orders/billing"; tipkv's
// command line tool lists and inspects them like any other. A message in
// the stream is a record (UUID, metadata, payload: see record.go, a
// frozen format with its own version tag); in a group's queue its value is
// the payload and its headers the metadata, with the UUID under
// UUIDHeader. A group's cursor starts at 1 (before every position a
// Publisher writes, positions being clock times) or at the newest
// position, never at 0, which Feed.Cursor returns for a group that does
// not exist.
//
// # Delivery
//
// Delivery is at least once. A subscription hands out one message at a
// time and waits for its Ack or Nack (Watermill's contract): Ack
// acknowledges it, Nack delivers it again after NackDelay, before the
// messages after it. There is no attempt limit unless MaxAttempts is set;
// then a message delivered that often moves to the group's dead-letter
// queue (Subscriber.Queue: DeadLetters, Requeue, Discard). A message is
// delivered again also when its lease runs out: when the process stops
// before the Ack is written (on Pebble: at the next Open; on a shared
// engine: Lease after the last extension), or if the lease was not
// extended in time. While a subscription holds a message (handed out, or
// leased in its batch) it extends the lease every Lease/3 of wall time,
// to Lease past the DB's clock, and logs each renewal at Trace level
// ("Lease extended", with the message's uuid).
//
// Order: one subscription of a group receives the group's messages in the
// order they were published (the stream's position order, which on every
// engine is the order of the Publish calls of one goroutine, and across
// processes on a shared engine the order of their commits). Several
// subscriptions of one group share its messages, a batch each, so across
// them there is no order; a message nacked or released goes back before
// the others. Per-key order across competing consumers (message groups)
// is not provided.
//
// Acknowledgements are written in batches: the subscription collects the
// Acks of a batch and writes them in the Update that moves the next batch
// into the queue (or at once when it ends). A crash loses the Acks not yet
// written, and those messages are delivered again. For exactly-once
// processing of a handler's own writes, the handler acknowledges in its
// Update with AckIn: the writes and the acknowledgement commit together,
// and a message whose writes committed is never delivered again. That is
// at-least-once delivery with an idempotent effect, not exactly-once
// delivery: a side effect outside the DB (an email) can still happen
// twice.
//
// # Cost of a message
//
// Publish is one synced commit per call (many messages in one call share
// it; concurrent Publish calls share Pebble's group commit). Draining a
// backlog with one subscription costs, per batch of BatchSize messages,
// one Update (the previous batch's acknowledgements and the next batch's
// move: one synced commit) and one Receive (its deliveries counted: one
// synced commit), so about 2/BatchSize synced commits per message instead
// of two per message. The numbers, against watermill-sql on PostgreSQL,
// are in the module's README.
//
// # Engines and processes
//
// On Pebble (tipkv.Open) one process owns the DB: every Publisher and
// Subscriber on it shares it, leases live in memory (a restart ends
// them), and a subscription waits on in-process notifications, not by
// polling. On etcd (etcdkv) and PostgreSQL (sqlkv) several processes open
// the same store and share its topics and groups: a group's subscriptions
// in different processes compete for its messages, the cursor's
// condition keeps two processes from moving the same messages, leases are
// stored in the messages (they outlive a crash and run out), and an
// Update that publishes may run its function again when another process
// published to the same topic first. Waiting uses the engine's watch
// where it has one, and otherwise polls (on PostgreSQL, feeds notify by
// default: a list given in sqlkv.Config.NotifyFamilies must keep
// codec.FamilyFeed to wake subscriptions without the poll interval). On etcd a batch holds
// at most 128 operations by default: the subscription finds that out by
// the first refused batch and then writes acknowledgements and moves in
// smaller Updates of their own.
//
// # Features
//
// The Features this Pub/Sub passes Watermill's suite with, which
// describe it:
//
//	ConsumerGroups                       yes: every group receives every message
//	GuaranteedOrder                      yes, for one subscription of a group
//	GuaranteedOrderWithSingleSubscriber  yes (several subscriptions share a group's messages)
//	Persistent                           yes: messages and groups are in the DB
//	NewSubscriberReceivesOldMessages     with Replay only (a group's new subscription
//	                                     does not receive what the group consumed)
//	ExactlyOnceDelivery                  no: at least once (see AckIn)
//	ContextPreserved                     no: a message's context is not stored
//	RequireSingleInstance                no: any number of Publishers and Subscribers,
//	                                     in one process or, on a shared engine, several
package tipkvwatermill
