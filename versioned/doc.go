// Package versioned stores document version histories and event feeds in
// tipkv's newest-first key family, so that the latest version of a
// document, the version as of v and the newest events of a stream are each
// one forward seek.
//
// A [Collection] is a named set of documents of type T. Each Put writes the
// next version of a document (1, 2, 3, ...); Latest, AsOf and Get read one
// version; History reads versions newest first, page by page; LatestAll
// reads the latest version of every document; Prune, PruneBefore and
// Delete drop versions.
//
// A [Feed] appends events of type T to named streams at positions that
// read as times; Newest and Between read them newest first; Trim and
// TrimBefore drop old ones.
//
// # Keys
//
// Numbers are written reversed (desc: MaxInt64 - n), so the newest sorts
// first under each prefix (see package codec and tipkv.Reverse):
//
//	version  01 | collection | id | desc(version)  -> encoded document
//	event    04 | stream          | desc(position) -> encoded event
//
// For example version 3 of document "a" of collection "users":
//
//	01 75 73 65 72 73 00 01 61 00 01 7f ff ff ff ff ff ff fc
//
// Everything before desc(n) is a document's (or stream's) prefix: bloom
// filters are kept per prefix, so the Latest of a document that never
// existed usually costs no data block read.
//
// # Reads
//
// Latest, AsOf and Get are one seek. History, Newest and Between are one
// seek and a forward scan with both bounds set: newest-first reads never
// iterate in reverse. LatestAll is a skip-scan: one seek per document.
// Reads see committed writes only, never the pending writes of a Batch.
// Iterators ([iter.Seq2]) yield an error once, as the last pair; read
// options come in a [tipkv.Query], and a page ends with a cursor to start
// the next one from (the Cursor method of the last item).
//
// # Writes and concurrency
//
// Every write takes a [tipkv.Writer]: the DB, to commit alone, or the
// Batch of a DB.Update, to commit atomically with the Update's other
// writes (other documents, feed events, queue messages).
//
// Versions are dense and unique under any concurrency: Put, PutIf, Delete,
// Prune and the feed trims of one DB share one lock, taken at the first
// such write of a Tx and released as soon as the Tx is visible (before its
// durability wait, so synced writes still share group commit) or aborted
// (its versions are then given back). Hence:
//
//   - Inside DB.Update, pass the Batch, never the DB: a version write on
//     the DB inside the function waits for the lock the Update holds, for
//     ever.
//   - An Update that writes a version holds the lock while its function
//     runs; keep such functions short.
//
// The latest versions of recently written documents are cached in memory
// (bounded, per DB), so a Put to a hot document needs no read.
//
// Appends take no shared lock: each stream remembers its last position in
// memory (read back from the store at the first Append after opening).
//
// A Delete leaves nothing behind: a later Put starts the document again at
// version 1.
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
