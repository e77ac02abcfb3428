// Package versioned stores document version histories and event feeds in
// tipkv's newest-first key family, so that the latest version of a
// document, the version as of v and the newest events of a stream are each
// one forward seek.
//
// A [Collection] is a named set of documents of type T. Each Put writes the
// next version of a document (1, 2, 3, ...); Latest, AsOf and Get read one
// version, LatestMany the latest of many documents; History and
// HistoryPage read versions newest first, page by page; LatestAll reads
// the latest version of every document; Count counts the versions kept.
// Delete marks a document deleted, keeping its history; Prune and
// PruneBefore drop old versions; Purge drops a whole history;
// Options.KeepVersions bounds every history as it is written;
// Options.TTL gives versions a time to live, after which they read as
// gone and a background pass (or PurgeExpired) purges the expired
// documents. Watch follows one document: each durable version once, in
// order, and its drops.
//
// A [Feed] appends events of type T to named streams at positions that
// read as times; Newest and Between read them newest first; Since and
// Follow read them oldest first for a consumer, never skipping an event
// that commits later at a lower position; named cursors (Cursor, Advance,
// Lag) keep each consumer group's position beside the data, and Groups,
// AllGroups and Backlog list the groups with what each has pending;
// members (Join, Member) let several replicas share a group, one active at
// a time under a lease fenced by an epoch (see Member); Trim and
// TrimBefore drop old ones, never past a group's cursor, and
// FeedOptions.Retention bounds streams by count and age with a background
// trimmer (or Retain), which warns about (and on request drops) stale
// groups that hold it back.
//
// [Collections] and [Streams] list the names in a store. Collection.In and
// Feed.In read in a snapshot (tipkv.DB.View): several reads that agree
// while writes commit.
//
// The same code runs on an exclusive engine (Pebble, the default: one
// process) and on shared ones (etcd, PostgreSQL: several processes write
// the same keys). What differs, and what each call costs where, is under
// Exclusive and shared engines.
//
// # Keys
//
// Numbers are written reversed (desc: MaxInt64 - n), so the newest sorts
// first under each prefix (see package codec and tipkv.Reverse):
//
//	version  01 | collection | id | desc(version)  -> header | encoded document
//	event    04 | stream          | desc(position) -> encoded event
//	mark     04 | stream          | desc(0)        -> asc(position)
//	cursor   06 | stream | group                   -> asc(position)
//	lease    0A | stream | group | asc(epoch)      -> asc(deadline) | member
//
// For example version 3 of document "a" of collection "users":
//
//	01 75 73 65 72 73 00 01 61 00 01 7f ff ff ff ff ff ff fc
//
// The mark is a stream's trim mark, at position 0, which no event holds:
// the cut of the last trim that dropped the stream's newest event (see
// Feed.Trim and feed_mark.go).
//
// Everything before desc(n) is a document's (or stream's) prefix: bloom
// filters are kept per prefix, so the Latest of a document that never
// existed usually costs no data block read.
//
// Every version's value starts with a header of 10 bytes, C1 | tag |
// commit time (Unix ns, big-endian), followed by the expiry of a version
// with a time to live (Options.TTL) and then the encoded document; a
// delete marker is the header alone (package internal/docfmt draws it
// byte by byte). msgpack never writes the byte C1, and no JSON or UTF-8
// text starts with it. Versions written by store formats before 4 keep
// the values they had: the single byte C1 for a delete marker, C1 01 |
// expiry before a document with a time to live, C1 00 before an encoding
// that starts with C1, else the encoding alone; they read as they did,
// with no commit time (Doc.Untimed). Every value a codec writes reads
// back as it was.
//
// # Idempotency keys
//
// Feed.AppendOnce and Collection.PutOnce write unless their key holds (per
// stream, per collection), and return the first write's position or
// version either way. Their scopes are tipkv.Window(d) and
// tipkv.UntilForgotten (ForgetKey ends one); package tipkv's doc ("Writes
// that are safe to repeat") has the table. A key does not follow its data:
// Trim, retention, Delete and Purge leave it holding, and it goes on
// returning a position or version that may be gone. A PutOnce key covers
// the document id as well as its content: the same key for another id is
// tipkv.ErrIdempotencyMismatch.
//
// # Versions are never reused
//
// A document's versions are dense, from the oldest kept to the latest, and
// a version number, once written, is never written again with other
// content: Delete writes a delete marker as the next version instead of
// dropping the history, and the next Put continues after it (deleted at
// version 4, the next Put writes 5). A cached version number, a cursor or
// a PutIf from before a Delete thus never points at a later document's
// content. In detail:
//
//   - Latest of a deleted document is ErrNotFound, and so are Get of the
//     marker's version and AsOf(v) when the greatest version <= v is a
//     marker. History yields the marker as a Doc with Deleted set and the
//     zero Value. LatestAll and LatestMany skip deleted documents.
//   - PutIf(expected) compares expected with the latest version number,
//     marker included (a stale PutIf(3) fails after a Delete at 4), and
//     expected 0 means "no live document now": never written, purged, or
//     deleted.
//   - Delete returns the marker's version, as DeleteIf does. Delete of a
//     missing or already deleted document writes nothing and is not an
//     error: it returns 0 for a missing (or purged) document, the marker's
//     version for a deleted one. Prune and PruneBefore count markers as
//     versions and never drop the latest version, marker or not.
//   - Purge drops every version, marker included. It is the one call after
//     which versions start again at 1.
//
// # Reads
//
// Latest, AsOf and Get are one seek, LatestMany one seek per document,
// Count two. History, Newest and Between are one seek and a forward scan
// with both bounds set: newest-first reads never iterate in reverse.
// LatestAll, Collections and Streams are skip-scans: one seek per document
// or name. Reads see committed writes only, never the pending writes of a
// Batch. Iterators ([iter.Seq2]) yield an error once, as the last pair;
// read options come in a [tipkv.Query], and a page ends with a cursor to
// start the next one from (the Cursor method of the last item, or the
// next cursor of HistoryPage).
//
// Each read tells an engine that reads in pages how many keys it wants (1
// for a point read and for each seek of a skip-scan, the limit plus one
// for a limited scan), so that on etcd or SQL it is one request. Reads in
// a snapshot (CollectionView, FeedView) cost the same as on the DB.
//
// # Value cache
//
// On an exclusive engine, Options.ValueCache keeps the latest decoded
// version of the most read documents in memory: Latest of such a document
// reads neither the store nor the codec (0.16-0.28x Pebble's Get of the
// same key in BENCHMARKS.md). An entry answers only when the version
// cache knows the document's latest version (exactly, on an exclusive
// engine) and it is the entry's version, filled since the last
// whole-document drop (after which versions start again at 1), so no
// write has to find it and it never answers with a version that is not
// the latest. Its Doc is shared by every Latest that hits it: treat the
// Value as read-only. Other reads (AsOf, History, reads of a view or a
// Batch) do not use it.
//
// # Writes and concurrency
//
// Every write takes a [tipkv.Writer]: the DB, to commit alone, or the
// Batch of a DB.Update, to commit atomically with the Update's other
// writes (other documents, feed events, queue messages).
//
// Versions are dense and unique under any concurrency. A write that reads
// before it writes (Put, PutIf, Delete, Purge, Prune, PruneBefore; Trim
// and TrimBefore per stream) holds its document from the Tx's first write
// of it until the Tx is visible (before its durability wait, so synced
// writes still share group commit) or fails (its versions are then given
// back); other writes of that document wait meanwhile, writes of other
// documents never do. Hence:
//
//   - Inside DB.Update, pass the Batch. A write on the DB there is a Tx of
//     its own: it commits on its own when no Update holds its document;
//     it waits when the Update holding it has returned from its function
//     and is committing; and it fails at once with ErrInvalid, telling to
//     pass the Batch, when an Update whose function is still running
//     holds it, for that may be the enclosing Update, which would wait for
//     it for ever.
//   - Two Updates that write the same documents in opposite orders could
//     wait for each other for ever; the one whose wait would close the
//     cycle fails with ErrConflict instead: retry it.
//   - A write waiting for a document when the DB closes returns
//     ErrClosed.
//   - An Update holds what it wrote while its function runs: keep such
//     functions short.
//
// What a write knows of a document (its latest and oldest versions) is
// cached in memory (bounded, per DB; an entry held by a Tx in flight is
// never evicted), so a Put or a Prune of a hot document needs no read.
//
// Appends take no lock: each stream remembers its last position in memory
// (read back from the store at the first Append after opening). A trim
// inside an Update counts and drops the Update's own Appends.
//
// A stream's positions never go back: Append places an event above every
// position the stream has held, across trims, retention, restarts and
// (on a shared engine) processes. A trim that drops the stream's newest
// event stores its cut as the stream's trim mark, and the last position
// Append reads back is the greater of the newest event and the mark; so a
// group's cursor or a follower at a trimmed position never skips a later
// event. Only AppendAt places an event where it is told, below them too.
//
// On Pebble, Prune, PruneBefore, Purge and the trims delete short runs of
// versions or events with point deletes and runs of 32 or more with one
// range delete that starts where the last one ended, so range deletes
// never overlap and never pile up in the memtable, where each would slow
// every new read. A read that walks to the oldest version (a whole
// History, Count) still steps over the tombstones of a document's recent
// drops until compaction removes them; a wake-up of Watch does not: it
// reads from the oldest version it found last (see watch.go).
//
// # Exclusive and shared engines
//
// On an exclusive engine (Pebble: one process holds the store), memory is
// the truth: the cache above (Latest of a document it knows is a point Get
// of its latest key; a write made around this package is seen after
// reopening), the stream positions, the trims' low bounds.
// A write sends no condition and reads only what it has never seen, and
// the function of a DB.Update runs once.
//
// On a shared engine (tipkv's storage Caps.Shared: etcd, PostgreSQL),
// other processes write the same documents and streams, so memory is a
// hint and the store the truth. The guarantees above hold across
// processes: versions dense and never reused, PutIf exact, a position
// written once. How:
//
//   - Every decision a write takes on a document's state travels with the
//     batch as conditions checked at commit: its latest version (the key
//     of the latest present, of the next absent; for a document with no
//     version, its range empty) and, for Prune, PruneBefore and Purge, its
//     oldest. A write that finds nothing to do (Delete of a deleted
//     document, a Prune with nothing to drop) sends them too, so that all
//     of an Update's writes hold at its commit. An Append requires its
//     position absent and, once per Update and stream, no event above the
//     last position the DB knew of, so that commit order is position
//     order; and that the stream's trim mark is the one it read, so that a
//     process whose memory missed other processes' events and the trim
//     that dropped them reads the stream again rather than go back below
//     them. Processes appending to one stream at full speed take turns
//     on its head: one whose commit lost reads the head and runs again,
//     and can lose several times running (measured on PostgreSQL with its
//     defaults, two processes: p99 4-7 retries, at most 11 in 250 Appends
//     each). Raise MaxRetries for such a stream, or give each process a
//     stream of its own.
//   - If another process wrote first, the commit fails, the DB drops what
//     it knew of the Tx's documents and streams, and the write runs again
//     on what the store holds: DB.Update runs its function again, at most
//     tipkv.Options.MaxRetries more times, then fails with an error that
//     matches ErrConflict. Keep an Update's function free of other side
//     effects. A commit whose outcome is unknown (ErrUnknownOutcome) is
//     never run again; the next write of those documents reads the store.
//   - Inside an Update, a write may fail with an error that matches both
//     ErrConflict and ErrConditionFailed: the Update was built on a state
//     another process has changed since. Return it, and the Update runs
//     again.
//   - Reads cost what they cost on Pebble. A write costs a read where it
//     has nothing to go on: a Put, Delete or Prune of a document this DB
//     has not written since it opened (reads do not count), or since a
//     commit that held it failed, reads the document's latest version, a
//     Prune its oldest too. A
//     PutIf reads nothing when its expected version agrees with what the
//     DB knows, or the DB knows nothing (the condition checks it), and
//     reads the store when they disagree, so that its ErrConflict is
//     always the store's answer. The first Append to a stream reads the
//     stream's newest position and its trim mark, and so does the first
//     after a failed commit. A trim reads whether anything is left to
//     drop, and the stream's newest event; one that drops it reads the
//     mark, and requires it unchanged as it raises it.
//   - Drops are one range delete: one operation for a remote engine, and
//     what it covers is decided at commit: a trim that drops anything also
//     drops what other processes appended below its cut meanwhile. Trim
//     keeps at least keepNewest events, more when other processes append
//     while it runs.
//   - The per-document holds above are this process's only: they spare its
//     own writes from failing each other's conditions. Positions are
//     unique across processes, and increase per process, not across them.
//
// # Times
//
// Every document version carries its commit time (Doc.Time): one reading
// of the DB's clock per Update, forced to increase within a document
// (1 ns past the latest version's time when the clock is not after it), so
// version order and time order agree within each document even when
// processes sharing an engine have skewed clocks. Nothing orders times
// across documents. Versions written before store format 4 have none.
//
// Reads by time (AsOfTime, HistoryBetween, LatestAllAsOf, ChangedBetween)
// search a document's versions by their times: about 2 + log2(versions)
// seeks. A collection may have a time index (EnableTimeIndex, a durable
// setting of the collection, not a handle's option; DisableTimeIndex
// removes it): a key per version, 0D | collection | id | desc(time) ->
// version, kept by every write and drop in its own batch, which turns
// the search into one seek of the index and one of the versions (on an
// exclusive engine, both on one iterator). Reads check what the index
// names against the versions, so their answers are the same with or
// without it; timeindex.go says how the index is filled, and how other
// processes of a shared engine learn that it was enabled.
//
// Feed positions are Unix nanoseconds. Writes take times in [MinTime,
// MaxTime] (after the epoch, before 2262): AppendAt, TrimBefore and the
// clock read by Append refuse others with ErrInvalid and write nothing.
// Between takes any times and clamps them: its answer is exact. A Feed
// reads the DB's clock (tipkv.Options.Clock) unless FeedOptions.Clock is
// set.
//
// # Limits
//
// Collection and stream names are 1 to [MaxNameSize] bytes, ids 1 to
// [MaxIDSize] bytes, encoded values at most [MaxValueSize] bytes; names
// and ids may hold any bytes. Versions and positions are >= 1. Writes over
// a limit fail with [tipkv.ErrInvalid] and write nothing. A value that does
// not decode is [tipkv.ErrCorrupt], naming the collection, id and version
// (or stream and position).
package versioned
