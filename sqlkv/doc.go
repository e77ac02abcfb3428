// Package sqlkv implements tipkv's storage contract on one SQL table,
//
//	CREATE TABLE tipkv (k bytea PRIMARY KEY, v bytea)
//
// reached through pgx: on PostgreSQL (tested), YugabyteDB (range-sharded,
// for capacity) or CockroachDB (a dialect row). Several processes may open
// the same table: the store declares itself Shared, and tipkv's packages
// then send every read a write depends on as a condition, checked by the
// server atomically with the writes.
//
// Each batch is one transaction sent as one pipeline (plan.go says how
// each condition holds until the commit); writers of a hot document,
// stream or queue that collided take its advisory lock before they read it
// again, and the others give way to it at commit, so they wait their turn
// instead of failing (engine.Locker and engine.LockHolding, lock.go); each
// iterator reads one
// REPEATABLE READ view, paged with tight bounds (iter.go); changes are
// pushed by LISTEN/NOTIFY for the key families in Config.NotifyFamilies
// (by default those of documents, queue state and feeds, which
// Collection.Watch, a queue's Wait and Feed.Follow watch: one
// notification per commit), and polled every Config.PollInterval
// otherwise (watch.go). A commit
// whose outcome the client cannot know matches engine.ErrUnknownOutcome and is never retried.
//
// bytea compares as bytes.Compare, which is tipkv's key order; newest-first
// reads are forward scans of the primary key (versions are stored in
// descending order), and Last is a backward scan.
package sqlkv
