// Package etcdkv runs tipkv on an etcd v3 cluster, shared by several
// processes: the same key layout, documents, feeds and queues as on Pebble,
// with the store as the truth and every write that depends on a read sent
// with its conditions.
//
//	db, err := etcdkv.Open(ctx, etcdkv.Config{
//		Endpoints: []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"},
//		Namespace: "/tipkv/orders/",
//	}, nil)
//
// Choose etcd for availability and several writers, not for capacity: one
// Raft group holds every key, each member holds all of them, and etcd's
// database is meant to stay small (a 2 GiB quota by default, about 8 GiB at
// most). Every write is a Raft commit synced on a quorum of members.
//
// # How the storage contract maps to etcd
//
// A batch is one etcd txn: its conditions are the txn's compares, its
// writes the txn's success ops, applied atomically at one revision and
// durable (synced on a quorum) when Apply returns. etcd refuses a txn that
// puts a key twice, puts and deletes one key, or puts inside a range it
// deletes, so the store first folds the batch's writes, in order, into an
// equivalent set that etcd accepts: the last write of a key wins, deletes
// merge into disjoint ranges, and a Set inside a deleted range splits it.
// The limits (Caps.MaxBatchOps from the server's --max-txn-ops, for the
// normalised writes and separately for the conditions; Caps.MaxBatchBytes
// from --max-request-bytes, less framing) are checked before anything is
// sent; a batch over them is ErrInvalid and writes nothing. A Set inside a
// range deleted by the same batch costs two ops.
//
// Conditions are compares: Absent is create_revision = 0, Present
// create_revision > 0, Equals value =, and RangeEmpty create_revision = 0
// over the range (it holds for an empty range, fails if any key is stored).
// A failed compare is ErrConditionFailed and nothing is written; the
// error is an *engine.ConditionError naming the keys of the conditions
// that failed (all of the batch's conditions when the txn has no writes
// or no op to spare under --max-txn-ops to find out which). The server
// reads the whole range of a RangeEmpty, values included, to decide it:
// keep such ranges to one document or one queue.
//
// # Hot keys
//
// Writers of one document, stream or queue that keep colliding take
// turns: the Store is an engine.Locker, and a write whose commit failed a
// condition takes the lock of its key's prefix (engine.LockPrefix) and
// runs again holding it. A lock is etcd's mutex recipe: a key per waiter
// under the prefix's lock directory, <namespace> FF×64 "locks/" <prefix in
// hex> "/" <lease id>, put with the store's lease; the oldest key holds
// it. The directory lies in the namespace but above codec.Keyspace, so no
// read, watch or delete of tipkv's meets it. Each batch is told which
// locks its writer holds (engine.LockHolding) and adds, for each other
// prefix its conditions are on, a compare that its lock directory is
// empty: a writer that has not collided yet gives way to a holder instead
// of overtaking it. The locks are advisory: every commit is still decided
// by its conditions, a holder's own lock is not re-checked, and a lock
// whose lease expired (its process died or lost the cluster for
// Config.LockTTL) is simply gone.
//
// Reads are linearizable. An iterator reads in pages at the revision of its
// first page, so a scan is one consistent view however long it takes;
// every seek starts with a page of one key and pages double up to
// Config.PageSize, so Latest and AsOf cost one key and a skip-scan one key
// per document; a reader that says how many keys it wants
// (engine.NewIterN: a Receive of 10 messages, a History page) gets them
// in its first page. Every page is bounded above by the tightest bound known:
// etcd walks the rest of an open-ended limited range to count it. Last
// sorts the whole range on the server (it cannot stop early on a
// descending read): give it a tight range. A snapshot is a revision.
// When the cluster compacts the revision a read is pinned to, that read
// fails with ErrCompacted; read again.
//
// Watch is an etcd watch from the revision current before Watch returns, so
// no change after it is missed; its channel closes when the watch breaks
// (the member loses its leader, the resume point was compacted).
//
// # Unknown outcomes
//
// An Apply whose txn was sent and got no answer (the request timed out, the
// connection broke, the member's leader died mid-proposal, the store was
// closed under it) fails with an error matching ErrUnknownOutcome
// (tipkv.ErrUnknownOutcome): the txn may have committed or not, and may
// still commit later if it sits in a Raft log. The store never resends it,
// and DB.Update does not rerun its function. What a caller can do:
//
//   - Make the write idempotent: write with a condition that only a first
//     application satisfies (PutIf with the version read, a key that must
//     be absent), so that running the whole operation again either applies
//     it or fails with a conflict that says it was already applied.
//   - Carry an idempotency key in the write (a request id in the document,
//     a message id in the queue item) and read back to see whether it
//     landed before trying again.
//   - For queues: a message may be missing only where an enqueue reported
//     an unknown outcome; enqueue it again with an id the consumer
//     deduplicates on.
//
// Errors the server gives before proposing a txn (no leader, no space,
// too many requests, permission denied) are plain errors: nothing was
// written and the caller may retry.
//
// # Administration
//
// etcd keeps old revisions until the cluster is compacted and returns the
// space to the file system only when each member is defragmented; both act
// on the whole cluster. Store.CompactRevisions, Store.Defragment,
// Store.Status, and the engine.Admin methods (Compact does both) are for
// the command line tool and operators; production clusters usually compact
// by themselves (--auto-compaction-retention).
package etcdkv
