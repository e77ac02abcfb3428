// Package queue is tipkv's oldest-first view: FIFO queues of typed
// messages, stored on the same codec as the document versions, with
// leases, acknowledgements, dead letters and a transactional outbox.
//
//	q, err := queue.Open[Event](db, "events", nil)
//	seq, err := q.Enqueue(db, Event{...})           // its Message.Seq; or q.Enqueue(batch, ...) inside db.Update
//	msgs, err := q.Receive(100, 30*time.Second)     // leased, oldest first
//	err = q.Ack(db, msgs[0].ID)                     // deleted
//
// A queue keeps its speed however many consumed messages lie before its
// head: every read starts at the head it tracks and stops at an upper
// bound, so no read ever walks deleted data.
//
// A queue runs on an exclusive engine (Pebble: one process owns the store)
// or on a shared one (etcd, PostgreSQL: several processes write the same
// queue). Its API and its promises to a consumer are the same on both;
// how it keeps them differs, and so do a few costs. Where a method's doc
// says "on Pebble" and "on a shared engine", this is why:
//
//	                      Pebble (exclusive)                shared engine (Caps.Shared)
//	sequence numbers      taken at the call, from memory;   taken at commit: the enqueue
//	                      a watermark hides a message       requires the state key to hold
//	                      until every lower number has      the tail it read; commit order
//	                      committed or failed; an aborted   is number order, no gaps
//	                      enqueue leaves a gap
//	leases                in memory: a restart ends them    in the item (tag 0x04): they
//	                                                        outlive a restart, held by nobody
//	a lapsed lease        redelivered when it ends          taken over Caps.ClockSkew after
//	                                                        it ends, by the taker's clock
//	Release, Extend       memory only (a delay is written)  one conditioned write each
//	Update's function     runs once (again only when an     may run again when another
//	(Enqueue in a Batch)  EnqueueOnce lost a race)          process enqueued first
//	Len, Stats            memory                            the store: O(live messages)
//	Wait                  an in-process notification        the engine's watch, or a poll
//	                                                        every Caps.PollInterval
//	Open                  reads the state key and seeks:    reads nothing
//	                      the first live message (past at
//	                      most 1,024 consumed after a
//	                      crash), the few after the
//	                      stored count
//	Metrics gauges        memory                            0 (Stats reads them)
//	Pause, MaxInFlight    memory, loaded by Open and set    the control key: each process's
//	                      by the write: a Receive reads     hint, required unchanged by
//	                      nothing for them                  every delivering write; under
//	                                                        a cap it counts the leases, and
//	                                                        every lease write rewrites it
//
// On a shared engine the store is the truth and memory a hint: every write
// that depends on a read requires, at commit, that what it read is still
// there (see "Shared engines" below), and a write that lost a race to
// another process reads again.
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
// one write (at most once). Peek reads without leasing; Inspect lists the
// messages in every state (ready, leased, delayed) for a console,
// changing nothing. Wait blocks until a message is visible; ReceiveWait
// blocks until it can lease some, which
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
// Pause stops every delivery of the queue until Resume, durably and in
// every process; SetMaxInFlight caps the messages leased at once. Both
// are stored in the queue's control key, and both go through a Writer, so
// that an Update may enqueue a batch and pause its queue in one write.
// While a queue is paused, or at its cap, Receive returns nothing (and no
// error) and ReceiveWait sleeps until a Resume, or an Ack, Release or
// lapsed lease that makes room, wakes it; everything but delivery goes
// on (see Pause).
//
// On Pebble, consumers see a message only once the commit that wrote it
// has returned (after its WAL sync, unless the DB is NoSync): Pebble shows
// a write to readers before the sync, and a consumer must not act on a
// message that a crash can still erase. Concurrent enqueues may commit out
// of sequence order; the queue keeps a watermark below which every enqueue
// has committed or failed, and reads stop there, so a consumer never skips
// a message that commits after a later one. On a shared engine a commit is
// durable when it is visible, and numbers are assigned in commit order, so
// neither is needed.
//
// # Message groups
//
// A message enqueued with EnqueueOptions.Group belongs to the group of
// that key (a tenant, an account, an order: whatever must be handled in
// order). A group's messages are delivered in queue order, at most
// Options.GroupWindow of them out at once (1 by default: one at a time),
// while other groups, and messages without a group, go on in parallel:
//
//	q.EnqueueWith(db, queue.EnqueueOptions{Group: order.ID}, event)
//
// The rule, on every engine: a message of a group may be delivered only
// while fewer than GroupWindow messages of its group come before it in
// the queue. Every message still in the queue counts, whatever its state:
// leased, ready again after a Release or a lapsed lease, delayed by a
// Retry's backoff or EnqueueAt. So with a window of 1 a group's next
// message waits until the one before is acknowledged, popped or moved to
// the dead letters: a message that keeps failing holds its group (and
// only its group) until MaxAttempts moves it to the dead letters, and a
// Requeue puts it behind the group's others. A window of N lets the
// group's N oldest messages out together (consumers may then finish them
// out of order). Ack, Release, Retry and Extend work as for any message;
// Message.Group, DeadLetter.Group and Inspect show the group.
//
// Fair share comes from the window: a group never has more than
// GroupWindow messages out, so a backlog of one group takes at most that
// many of the consumers' slots, and a quiet group's message is delivered
// by the first Receive after it is enqueued, however long the backlog in
// front of it (the conformance suite's GroupFairShare checks it on every
// engine, behind 10,000 messages; BENCHMARKS.md has the waits). Among
// the deliverable messages, the oldest go first.
//
// What a read costs: on Pebble, a message read past its group's window
// gets an entry in memory (about 100 bytes) once, and waits there until
// the window reaches it; no later Receive reads it again, so a backlog is
// read once, whatever its size, and held in memory while it waits. On a
// shared engine the store is the only truth about a group: every Receive
// reads the queue from its head past the messages behind their windows,
// so a Receive's cost grows with the messages waiting in front of the
// first deliverable ones (a backlog of 10,000 in one group is 10,000 rows
// read per Receive). Groups are not counted anywhere, and cost nothing
// when they end.
//
// Every handle of a queue must use the same GroupWindow: a process with a
// larger one delivers past another's window. On Pebble a second window
// for a queue open in the DB is refused.
//
// # Idempotency keys
//
// EnqueueOnce enqueues a message unless its key holds in the queue, and
// returns the first message's sequence number either way: a relay that
// publishes again after a crash, or an HTTP handler retried by its client,
// enqueues once. tipkv.UntilDone holds the key while the message is in the
// queue (ready, leased, delayed, or a dead letter) and ends it at Ack, Pop,
// Discard or Requeue; tipkv.Window(d) and tipkv.UntilForgotten hold it for
// a time or until ForgetKey. The one table of what every transition does
// to each scope is in package tipkv's doc ("Writes that are safe to
// repeat"). The key's record is written in the message's batch with the
// condition that it is absent, so on every engine, Pebble included, an
// Update whose function calls EnqueueOnce may run its function again when
// another writer used the key first. No transition writes anything for
// keys: an until-done key ends when its message is neither an item nor a
// dead letter, read when the key is next used, and the sweep deletes it.
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
// # Headers and trace context
//
// EnqueueWith stores Headers (string pairs) with each message; Receive,
// Pop, Peek and DeadLetters return them, and Requeue keeps them. Use them
// for metadata the value should not carry, above all trace context: the
// producer injects its span's context (with OpenTelemetry, a
// propagation.MapCarrier is a map[string]string, as Headers is), the
// consumer extracts it and links its span to the producer's. A message
// without headers is stored as before headers existed.
//
// # Metadata
//
// A message enqueued through tipkv.WithMetadata, or inside an Update
// whose Batch.SetMetadata set it, stores that tipkv.Metadata (author,
// reason, correlation and causation ids, headers: the shape document
// versions carry); Message.Metadata and DeadLetter.Metadata decode it
// when asked, and redeliveries, dead letters and Requeue keep it. A
// message's Enqueued is its Update's commit time: one reading of the
// DB's clock per Update, the time its document versions carry.
//
// # Logs and metrics
//
// A queue logs through the DB's logger (tipkv.Options.Logger; nothing by
// default), each record with the attributes event, queue and seq: a lease
// that ended without an Ack ("lease-expired", Info), a message delivered
// again ("redelivery", Debug), a message moved to the dead-letter queue
// ("dead-letter", Warn, with attempts and reason "max-attempts" or
// "corrupt"), and a stored value that does not decode ("corrupt", Error,
// with its key in hex and the error). The handler runs with the queue's
// lock held: it must not call the DB.
//
// Every queue opened in a process adds an entry to DB.Metrics
// (tipkv.QueueMetrics), read from memory without touching the store. On
// Pebble, Depth is Len, Leased and Delayed as in Stats, and DeadLetters
// the dead letters (counted when the queue is opened, then kept). The
// counters count this process's work since the queue was opened:
// Enqueued (requeued dead letters included), Deliveries (every message
// Receive or Pop hands out), Redeliveries (those of them delivered
// before), Acks, DeadLettered. On a shared engine only the store knows
// the gauges: QueueMetrics.Gauges is false, the exporters leave them out,
// and Stats reads them (DeadLetters included) from the store.
//
// # Keys
//
//	item         02 | name | asc(seq)   item header | payload
//	state        03 | name              0x01 | uvarint head | uvarint tail
//	                                    or 0x02 | the same | uvarint count | uvarint countTo
//	                                    or 0x03 | the same as 0x02 (a run of consumes may follow)
//	dead letter  05 | name | asc(seq)   dead header | payload
//	once key     07 | "queue" | name | key, and 08 or 09 index entries (see package tipkv)
//	control      0C | name              0x01 | uvarint flags (0x01: paused) | uvarint maxInFlight
//	                                    or 0x02 | the same | uvarint n | n times uvarint seq | varint lease end
//
//	item header  0x01 | uvarint attempts | varint enqueued | varint visible-at
//	             or 0x04 | uvarint attempts | varint enqueued | varint lease end
//	dead header  0x02 | uvarint attempts | varint enqueued | varint died
//	             or 0x03 | the stored bytes of an item whose header was corrupt
//	headers      tag | 0x10, then the header's fields | uvarint len | len bytes of pairs
//	metadata     tag | 0x20, then the same, [headers] | uvarint len | metadata
//	group        tag | 0x40, then the same, [headers] | [metadata] | uvarint len | group key
//	pair         uvarint key length | key | uvarint value length | value (keys sorted)
//
// Tag 0x04 marks a leased item; only shared engines write it (on Pebble a
// lease lives in memory), and Pebble reads one as an item visible at its
// lease's end. Tags 0x11, 0x12 and 0x14 are 0x01, 0x02 and 0x04 with
// headers; a message without headers keeps the tag without 0x10, and
// likewise for metadata (0x20) and a group (0x40, within store format 4;
// a release before it reads a message of a group as corrupt). State tag
// 0x02 (Pebble) adds count, the number of live messages below countTo;
// tag 0x03 (Pebble) holds the same and says that consumes may have
// followed it without writing the key (see below); shared engines write
// tag 0x01. Versions before these tags read a value
// that has one as corrupt. The control key is absent until the first
// Pause, Resume or SetMaxInFlight (on a shared engine, or the first
// delivery, which writes it not paused and uncapped so that the next ones
// can require it equal); its family came within store format 4,
// and a release before it ignores the key (see package tipkv, "Stability").
//
// Times are Unix nanoseconds, 0 for none. The payload is the value codec's
// encoding (msgpack by default). Sequence numbers start at 1.
//
// # Head, tail and crash consistency (Pebble)
//
// Sequence numbers come from memory. The state key holds head and tail:
// head is the oldest message a batch that wrote it left unconsumed,
// counting the batches applied before it as done and every other write in
// flight as not done, so every number below head is consumed and deleted
// once the batch commits; tail is the next sequence number the process
// would assign. Both are lower bounds, and a crash can never leave them
// ahead of the messages they describe, because they commit in the same
// batch as the deletes (and Pebble loses no write while keeping a later
// one, so a state value that survives a crash describes the batches
// applied before it too).
//
// Neither ever moves back, whatever order batches commit in. The state
// value is computed as late as possible, just before the batch is applied
// (after the function of its Update has returned), under one lock for the
// DB that is held until the batch is applied: state values are applied in
// the order they were computed, and each is at least the one applied
// before it. An Ack inside a long Update thus never writes the tail it
// would have seen when it was called. The lock covers the apply to the
// memtable, not the WAL sync, so synced consumers still share group
// commits.
//
// Most consumes do not write the key. A consume (Ack, Pop, a move to the
// dead-letter queue) leaves it as it is when the stored value has tag 0x03
// and the batch extends the run of messages consumed since it: the
// numbers it consumes are the next ones of the run [head, front), the run
// stays within 1,024 numbers of the stored head, and the number after it
// holds a live message that no applied batch consumed (or lies at or past
// the stored count's end). Everything else writes the key: a consume out
// of queue order, one that would end the run at a gap an aborted enqueue
// left (after a reopen, at any number below the tail Open found, unless
// the count shows no gap there), one that ends the 1,024, and DB.Close. A Pop(1) is thus its Get and its
// Delete, and a Pop or an in-order Receive+Ack writes the key once in
// 1,024 messages. (The bound is in numbers, not time: it is what bounds
// the walk after a crash, and a clock would only add writes.) A value written when its head holds a live
// message (or lies at its count's end) gets tag 0x03; otherwise tag 0x02,
// and the next consume writes the key again.
//
// After a crash Open seeks from the stored head to the first live
// message, as it always did; the seek steps over the run's tombstones, at
// most 1,024 numbers (a counter of the keys its iterator steps on proves
// it in tests/crash). Every number from the stored head to that message
// below the count's end was a live message when the value was written and
// was consumed since (the run's rules make it so, whichever batches the
// crash kept), so Open takes exactly that many from the stored count.
//
// The state value also counts the live messages below countTo, the
// watermark when it was computed: every enqueue below it has committed or
// failed, so memory knows how many messages they added, and every consume
// applied before is in the count last stored or in the run after it. Open then reads the state,
// seeks to the first live message from the head, and counts only the
// messages from countTo to the end of the queue: a few seeks whatever the
// queue holds (measured: BENCHMARKS.md, "Queues"), and the same with a
// straggler leased and never acknowledged at the head. A state value
// written before counts existed (tag 0x01) makes that one Open walk every
// live message from the head, as every Open used to; the next consume
// writes a count. Tag 0x02 says no consume followed the value.
//
// Enqueues do not write the state key; DB.Close does, for every queue
// with messages enqueued or consumed since it was stored, so after a clean
// close Open walks none. After a crash, Open walks and counts the messages
// enqueued since the key was last written (about 1 µs a message: a queue
// that was only ever filled, a million messages deep, takes about a
// second to open after a crash). Two costs keep enqueues away from it. Writing it in
// every enqueue would put every enqueue of the DB under the state lock:
// measured with 8 producers, that made enqueues 1.4-1.8x slower without
// sync and 1.1-1.3x slower with it (BenchmarkEnqueueState). And writing it
// even once in 1,024 messages, as tipkv did before, put a key far from
// the messages into every table Pebble flushed, so no table could be moved
// down the tree whole: while a queue filled, Pebble rewrote every message
// in compactions, and filling it took about 2.6 times the CPU it takes
// without them (BENCHMARKS.md, "The queue-state key and compactions").
// A queue being consumed in order still writes the key once in 1,024
// numbers (every consume wrote it before), so the tables flushed while it
// drains hold it; what Pebble compacts there is mostly tombstones and the
// messages they delete.
// The tail after a restart is max(stored tail, last message + 1, last
// dead letter + 1).
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
// waits for the oldest unacknowledged message. No read passes a
// tombstone, reads starting at the head, but for Open after a crash,
// which passes those of at most 1,024 numbers (see above). Pebble's compactions drop the
// tombstones and the data they cover in the background.
//
// # Leases in memory (Pebble)
//
// A DB belongs to one process, so who holds which lease is kept in memory,
// shared by every handle of a queue. After a restart no lease exists:
// every unacknowledged message is visible again, with its attempts counted
// so far, and IDs from before the restart return ErrLeaseLost.
//
// # Shared engines
//
// Several processes write one queue; each keeps hints only, and every
// write requires what it relies on:
//
//   - Enqueue (and Requeue) reads the state key and writes it with the
//     tail moved past the new numbers, requiring it to hold what it read
//     (or to be absent, for a new queue). Two enqueues that read the same
//     tail cannot both commit; the loser reads again (inside an Update,
//     its function runs again). Numbers are dense and in commit order.
//     A process that enqueued last requires the bytes it wrote instead of
//     reading them again (the tail hint: one round trip less); a hint
//     that another process made stale fails the commit like a stale read,
//     and the next allocations read first: twice as many after each miss
//     in a row (up to 256), half as many after each hit.
//   - Receive writes each message it delivers as a leased item (its
//     attempts one higher, the lease's end in its header), Pop deletes it,
//     a move to the dead letters does both, each requiring the item to
//     hold the bytes read. Two processes never deliver one message within
//     a lease: the loser reads again (at once, up to 100 times).
//   - Goroutines of one process share its memory of the queue: a
//     delivery claims the messages it picked until its write is done, and
//     the others pass over them; a read that began before this process
//     committed a write to an item passes over that item too (it may show
//     the bytes from before), so a Receive never mistakes a lease taken
//     meanwhile by another goroutine for another process's change.
//   - Processes meet at commit. A process whose Receive lost a message to
//     another spreads out: its next Receives start a random whole number
//     of batches into the visible messages (up to 64 batches, 2,048
//     messages), the spread doubling with each loss and shrinking with
//     each Receive that wins at once, so consumers crowding the head
//     claim disjoint messages, as SKIP LOCKED does on PostgreSQL. A
//     consumer alone never loses, and receives oldest first; Pop always
//     starts at the head, so each popper gets messages in queue order.
//   - Ack, Release, Retry and Extend require the item to hold the bytes
//     this process last wrote. Another process that took the message over
//     counted an attempt, so the bytes differ: ErrLeaseLost. After a write
//     whose outcome is unknown, the next one reads the item first.
//   - A lease is taken over only Caps.ClockSkew after it ended by the
//     taker's clock: processes whose clocks disagree by less than that
//     never deliver one message within a lease. Delays (EnqueueAt, Release
//     and Retry with a delay) end when they end, without the margin.
//   - Acks do not write the state key (every ack would then conflict with
//     every enqueue). Its head is a lower bound that each process raises
//     in memory as its reads find the first live message (every number
//     below it was written, numbers being assigned in commit order, and a
//     consumed number never comes back); enqueues write the highest head
//     their process knows, and a consumer that runs 1,024 past the stored
//     head writes it alone, as a hint that may fail. A message that stays
//     leased holds the head; each process remembers the runs of 64 or more
//     consumed numbers behind it that its reads have passed, and later
//     reads seek over them instead of walking them.
//   - Reads start at the process's head and read the live messages from
//     there: Receive and Peek as far as they must, Len and Stats all of
//     them, so their cost grows with the messages leased or delayed ahead
//     of the first visible one (and, for Len and Stats, with the queue).
//   - A message's bytes travel twice in the batch that leases it (as the
//     condition and as the new value), so an enqueue refuses a value over
//     half of Caps.MaxBatchBytes (less a margin), and Receive and Pop take
//     no more messages than one batch holds (Caps.MaxBatchOps: 128 on
//     etcd by default). Ack adds a condition per message: acknowledge in
//     groups that fit.
//   - Pause, Resume and SetMaxInFlight read the control key and write it,
//     requiring it unchanged. Each process keeps the bytes it last read
//     as a hint, and every Receive and Pop requires the key to hold them
//     at commit: a delivery that raced with another process's Pause fails
//     there and reads again, and reads nothing for the pause otherwise.
//     The first delivery of a queue writes the key, not paused, if it is
//     absent, so that the deliveries after it require it equal (a check
//     that deliveries pass side by side; on PostgreSQL the condition that
//     a key is absent is a row each delivery would insert and the others
//     wait for). Ack, Release, Retry and Extend require it too. A
//     process whose hint says paused reads the key at each Receive and at
//     each wake-up of a Wait. A Resume writes the queue-state key again,
//     unchanged, so that it wakes the Waits of every process as an
//     enqueue does (and so does a cap raised or removed).
//   - Under a cap (SetMaxInFlight) the control key also counts the
//     leases: the sequence number and end of each. Every write that
//     takes a lease, ends one or moves its end reads the key and writes
//     it with its change, requiring it unchanged, so the count is exact
//     whatever the processes do at once; a lease leaves the count
//     ClockSkew after its end, as its message becomes takeable. The
//     consumers of a capped queue take turns on that key. Leases taken
//     before the cap was set are counted from the items by the first
//     delivery under it (the key has tag 0x01 until then).
//   - Wait watches the queue's state key (every enqueue writes it) and its
//     items (Release and Retry write those) where the engine can watch,
//     and otherwise reads again every Caps.PollInterval; on PostgreSQL
//     the state family notifies and the items family does not (every
//     Receive and Ack writes items), so a Release by another process
//     wakes a Wait within the poll interval. No write marks a lease
//     that lapses: Wait sets a timer for the earliest lease end (plus
//     ClockSkew) or delay it has read.
package queue
