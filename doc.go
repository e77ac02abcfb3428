// Package tipkv is an embedded latest-version and time-series store for Go
// services, on Pebble.
//
// It keeps document version history (package versioned: Put, Latest, AsOf,
// History), event feeds (versioned.Feed: Append, Newest, Between) and FIFO
// work queues with leases, acks, dead letters and a transactional outbox
// (package queue). This package opens the store and commits atomic batches
// across all of them:
//
//	db, err := tipkv.Open(dir, nil)
//	...
//	err = db.Update(func(b *tipkv.Batch) error {
//		if _, err := orders.Put(b, "order-17", order); err != nil {
//			return err
//		}
//		_, err := events.Enqueue(b, OrderPlaced{ID: "order-17"})
//		return err
//	})
//
// Both writes survive a crash, or neither does.
//
// # Numbers in keys are reversed
//
// A version or position n is written into its key as MaxInt64 - n, in 8
// big-endian bytes (see [Reverse]). Pebble keeps keys in ascending byte
// order, so a document's newest version is its first key: "the latest
// version", "the newest N events" and "the version as of v" are each one
// forward seek, never a reverse scan. Queues use the other order, asc(n), so
// their oldest message comes first.
//
// # Key layout
//
// Every key starts with a family byte. Strings are escaped (0x00 becomes
// 0x00 0xFF) and end in 0x00 0x01, so ids may hold any bytes and no id's
// encoding is a prefix of another's ("doc-1" never interleaves with
// "doc-10"). Package codec specifies every part, with hex examples and
// golden vectors.
//
//	family 0x00  meta          00 | name                       format version
//	family 0x01  versions      01 | collection | id | desc(v)  document
//	family 0x02  queue items   02 | queue | asc(seq)           message
//	family 0x03  queue state   03 | queue                      head, tail
//	family 0x04  feed events   04 | stream | desc(pos)         event (pos 0: no event, the stream's trim mark, asc(pos))
//	family 0x05  dead letters  05 | queue | asc(seq)           message
//	family 0x06  feed cursors  06 | stream | group             asc(position)
//	family 0x07  once          07 | space | name | key         idempotency key: result, hash, scope
//	family 0x08  once due      08 | due | space | name | key   01 (windowed keys, by their end)
//	family 0x09  once seqs     09 | queue | asc(seq)           key (until-done keys, by message)
//	family 0x0A  feed leases   0A | stream | group | asc(ep)   asc(deadline) member
//	family 0x0B  purges        0B | collection | desc(time)    empty (a collection's purge horizon)
//	family 0x0C  queue control 0C | queue                      paused, max in flight
//	family 0x0D  time index    0D | collection | id | desc(t)  asc(version) (a collection's optional time index; id "" holds its state)
//
// Version 1 of "alice" in collection "users":
//
//	01 | 75 73 65 72 73 00 01 | 61 6c 69 63 65 00 01 | 7f ff ff ff ff ff ff fe
//	     u  s  e  r  s  end     a  l  i  c  e  end     MaxInt64 - 1
//
// Pebble is given a comparer named "tipkv.v1" that orders keys bytewise and
// splits off the 8-byte number, so bloom filters and prefix seeks work per
// document; a lookup of a document that never existed is usually answered
// by the filters without reading a data block.
//
// # Stability
//
// tipkv is at v0. Before 1.0 a minor release (v0.x to v0.y) may change the
// Go API, and CHANGELOG.md lists every such change with what to write
// instead; a patch release does not break it. From v1.0.0 the module
// follows semantic import versioning and the Go 1 compatibility practice:
// within v1, correct code keeps compiling and behaving as documented
// (fixes of security problems, and of behaviour that contradicts the
// documentation, aside); a breaking change means a new module path,
// github.com/tipkv/tipkv/v2. Packages under internal/ carry no promise.
//
// The on-disk format has its own version, [FormatVersion], before and
// after 1.0 alike. Every release reads every format an earlier release
// wrote. A store of a newer format is refused with [ErrFormat] and left as
// it is, never misread. An older format is upgraded in place only when the
// store is opened for writing (a ReadOnly open changes nothing and reads
// the store by its own format), and what was fixed when the store was
// created, such as how struct fields are named, is kept. There is no
// downgrade: upgrade every process that opens a store before the first one
// writes it. Any change to what is stored (key layout, the comparer name
// "tipkv.v1", value encoding, a new key family) comes with a new format
// version, with one exception: a family that no older release reads, and
// whose meaning needs nothing of an older release, is added within a
// format; an older release then works on the store as before, leaves
// those keys alone, and its check reports them as keys of an unknown
// family. The idempotency families 0x07-0x09 (whose keys end by being
// read, not by other writes), the consumer-group leases 0x0A and the
// queue control keys 0x0C are such families; an older release's
// Feed.Advance does not heed leases, so upgrade every replica of a group
// before its members join, and an older release delivers from a paused
// queue, or past its cap on messages in flight, so upgrade every process
// that consumes a queue before it is paused or capped. The time index
// 0x0D is one too: an older release's writes of a collection do not keep
// its index, so upgrade every process that writes a collection before its
// index is enabled (reads by time check what the index names against the
// versions and stay right; tipkv check reports the stale entries, and
// DisableTimeIndex then EnableTimeIndex rebuilds it). The purge
// horizons 0x0B are part of format 4 from its first release. Values are
// decoded into your types as they are now; package
// codec says what a change of a type's shape does.
//
// An upgrade never changes what a stored key or value reads as. Where a
// new format gives meaning to bytes an older one stored as data (format 2
// gave the single byte C1 a meaning, format 3 the document values that
// start with C1), the upgrade rewrites those values so that they read as
// before, in bounded batches that record how far it got: an upgrade
// stopped at any point (a crash, a kill) is finished by the next Open for
// writing, or never began, and an older release refuses the store as soon
// as it began. Every format has a compatibility corpus under
// testdata/compat: a small store written by that format's own code, and a
// manifest of what it holds, which a test opens, upgrades and compares
// with today's code; a format bump adds its corpus in the same change.
//
// # Writes that are safe to repeat
//
// A producer that may send one write twice (an at-least-once relay, an
// HTTP retry, a restarted job) gives it an idempotency key: queue's
// EnqueueOnce, versioned's Feed.AppendOnce and Collection.PutOnce. The
// key's record commits in the batch of the write it guards, on the
// condition that it is absent, so the two are one atomic write, inside a
// DB.Update with other writes too; a second write with the key, while it
// holds, writes nothing and returns what the first produced (its sequence
// number, position or version) and dup true; the same key with other
// content (compared by a hash of the value's encoding) is
// ErrIdempotencyMismatch. Two writers racing with one key, goroutines or
// processes on a shared engine, make one write: the loser's condition
// fails, its write runs again and finds the winner's (so an Update whose
// function makes such a write may run it again on any engine, Pebble
// included).
//
// How long a key holds is its [Scope], one of three, and this table is
// what every event does to a key of each (keys are per queue, stream or
// collection):
//
//	event                              Window(d)         UntilDone (queues)   UntilForgotten
//	the guarded write commits          holds for d       holds                holds
//	Receive, Release, Retry, a lease   holds             holds                holds
//	  that lapses, dead letter
//	Requeue of a dead letter           holds             ends (a new message, holds
//	                                                     a new number)
//	Ack, Pop, Discard                  holds             ends                 holds
//	Trim, retention, Delete, Purge     holds             -                    holds
//	  (feeds, documents)
//	d has passed (the DB's clock)      ends              -                    -
//	ForgetKey                          ends              ends                 ends
//	its Update fails or aborts         never held        never held           never held
//	a sweep (DB.SweepKeys, or every    deletes it once   deletes it once      never
//	  minute in the background)        ended             ended
//
// "Holds" means the next write with the key returns the first result;
// "ends" means it is made anew. A key's end is read, not written: a
// window ends when the clock passes it, an until-done key when its
// message is neither in the queue nor among its dead letters (sequence
// numbers are never reused), so Ack and the other transitions write
// nothing for keys. The sweep then deletes what ended, walking only
// ended keys (an index by end time, and each queue's keys below its
// head) with range deletes, so keys never grow without bound; keys
// UntilForgotten are never swept. A key is at most 1,024 bytes.
//
// # Durability and concurrency
//
// A DB is safe for concurrent use. Writes are synced before they return
// unless [Options.NoSync] is set; concurrent synced writers share Pebble's
// group commit. A DB on Pebble belongs to one process at a time: Pebble
// locks the directory.
//
// # Engines
//
// Open runs tipkv on Pebble, embedded: one process owns the store and
// keeps versions, sequence numbers, leases and watermarks in memory. The
// same key layout runs on engines shared by several processes (module
// github.com/tipkv/tipkv/etcdkv for etcd, github.com/tipkv/tipkv/sqlkv for
// PostgreSQL and YugabyteDB): there the store is the truth and memory a
// hint, every write that depends on a read carries a condition checked at
// commit, and [DB.Update] may run its function again when another process
// won a race. The packages' docs say which guarantees hold on which kind
// of engine.
package tipkv
