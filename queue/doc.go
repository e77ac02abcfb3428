// Package queue is tipkv's oldest-first view: FIFO queues of typed
// messages, stored on the same codec as the document versions, with
// leases, acknowledgements, dead letters and a transactional outbox.
//
//	q, err := queue.Open[Event](db, "events", nil)
//	err = q.Enqueue(db, Event{...})                 // or q.Enqueue(batch, ...) inside db.Update
//	msgs, err := q.Receive(100, 30*time.Second)     // leased, oldest first
//	err = q.Ack(db, msgs[0].ID)                     // deleted
//
// A queue keeps its speed however many consumed messages lie before its
// head: every read starts at the head it tracks and stops at an upper
// bound, so no read ever walks deleted data.
//
// # Delivery
//
// Receive leases messages (at least once): Ack deletes them, Release or an
// ended lease makes them visible again, and every delivery is counted in
// the stored message before Receive returns. Retry is Release after a
// failed attempt, with the delay the handle's Options.Backoff gives for
// the attempts so far. A message delivered MaxAttempts times that becomes
// visible again moves to the queue's dead-letter queue, where DeadLetters
// lists it and Requeue or Discard handle it. Pop receives and deletes in
// one write (at most once). Peek reads without leasing. Wait blocks until
// a message is visible; ReceiveWait blocks until it can lease some, which
// makes the loop of a long-running consumer (ExampleQueue_ReceiveWait has
// it in full, with its errors):
//
//	for {
//		msgs, err := q.ReceiveWait(ctx, 100, time.Minute) // ctx.Err() at shutdown
//		...
//		for _, m := range msgs {
//			if handle(m.Value) != nil {
//				q.Retry(m.ID) // visible again after a backoff
//			} else {
//				q.Ack(db, m.ID)
//			}
//		}
//	}
//
// Consumers see a message only once the commit that wrote it has returned
// (after its WAL sync, unless the DB is NoSync): Pebble shows a write to
// readers before the sync, and a consumer must not act on a message that a
// crash can still erase. Concurrent enqueues may commit out of sequence
// order; the queue keeps a watermark below which every enqueue has
// committed or failed, and reads stop there, so a consumer never skips a
// message that commits after a later one.
//
// # Time
//
// Every time a queue reads or stores comes from the DB's clock
// (tipkv.Options.Clock): enqueue and dead-letter times, the ends of leases,
// delays and backoffs, and the now that decides what is visible. A test
// injects a clock to drive lease expiry and delays without sleeping. Wait
// sleeps on a wall-clock timer for the time the DB's clock says is left;
// after moving an injected clock, call Wake and every Wait checks again.
// Stored times are Unix nanoseconds, so times before 1970 or after 2262
// are refused with tipkv.ErrInvalid by the call that would store or
// compute them (see EnqueueAt).
//
// # Keys
//
//	item         02 | name | asc(seq)   item header | payload
//	state        03 | name              0x01 | uvarint head | uvarint tail
//	dead letter  05 | name | asc(seq)   dead header | payload
//
//	item header  0x01 | uvarint attempts | varint enqueued | varint visible-at
//	dead header  0x02 | uvarint attempts | varint enqueued | varint died
//	             or 0x03 | the stored bytes of an item whose header was corrupt
//
// Times are Unix nanoseconds, 0 for none. The payload is the value codec's
// encoding (msgpack by default). Sequence numbers start at 1.
//
// # Head, tail and crash consistency
//
// Sequence numbers come from memory. Every batch that deletes messages
// (Ack, Pop, a move to the dead-letter queue) also writes the state key:
// head is the oldest message that batch leaves unconsumed, counting every
// other write in flight as not done, so every number below head is
// consumed and deleted once the batch commits, and tail is the next
// sequence number the process would assign. Both are lower bounds, and a
// crash can never leave them ahead of the messages they describe, because
// they commit in the same batch as the deletes.
//
// Neither ever moves back, whatever order batches commit in. The state
// value is computed as late as possible, just before the batch is applied
// (after the function of its Update has returned), under one lock for the
// DB that is held until the batch is applied: state values are applied in
// the order they were computed, and each is at least the one applied
// before it. An Ack inside a long Update thus never writes the tail it
// would have seen when it was called. The lock covers the apply to the
// memtable, not the WAL sync, so synced consumers still share group
// commits. (Pebble loses no write while keeping
// a later one, so a state value that survives a crash describes the
// batches applied before it too.)
//
// Enqueues do not write the state key: the tail is found when a queue is
// first opened in a process, by one walk from the stored head to the end
// of the queue that also counts the live messages (which the walk is
// needed for anyway), and tail = max(stored tail, last + 1, last dead
// letter + 1). The walk starts at the head, so it never passes consumed
// messages. Writing the tail in every enqueue as well would put every
// enqueue of the DB under the state lock: measured with 8 producers, that
// made enqueues 1.4-1.8x slower without sync and 1.1-1.3x slower with it
// (BenchmarkEnqueueState), and saved nothing while the count needs the
// walk.
//
// # Deletes
//
// Acknowledged messages are deleted at once, in the acknowledging batch:
// each run of at least 128 consecutive sequence numbers in one Ack (or Pop,
// or dead-letter move) with one DeleteRange, a shorter run with point
// Deletes. Short range tombstones are what Pebble handles worst: every new
// iterator re-fragments all the range tombstones in the memtable, so
// acking a few messages at a time with DeleteRange made every read pay for
// thousands of them (16x slower at 20 per ack, 55x at 5). Every number is
// consumed exactly once, so tombstones never overlap. Messages
// acknowledged out of order are deleted as well; only the in-memory head
// waits for the oldest unacknowledged message. No read ever passes a
// tombstone: reads start at the head. Pebble's compactions drop the
// tombstones and the data they cover in the background.
//
// # Leases in memory
//
// A DB belongs to one process, so who holds which lease is kept in memory,
// shared by every handle of a queue. After a restart no lease exists:
// every unacknowledged message is visible again, with its attempts counted
// so far, and IDs from before the restart return ErrLeaseLost.
package queue
