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
//		return events.Enqueue(b, OrderPlaced{ID: "order-17"})
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
//	family 0x04  feed events   04 | stream | desc(pos)         event
//	family 0x05  dead letters  05 | queue | asc(seq)           message
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
// The key layout, the comparer name and the msgpack value encoding of store
// format 1 ([FormatVersion]) are frozen: a store written by this version is
// readable by every later version. A later format will be refused by this
// version with [ErrFormat] rather than misread. The Go API may still change
// before v1.0.0.
//
// # Durability and concurrency
//
// A DB is safe for concurrent use. Writes are synced before they return
// unless [Options.NoSync] is set; concurrent synced writers share Pebble's
// group commit. A DB belongs to one process at a time: Pebble locks the
// directory.
package tipkv
