package versioned

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/link"
)

// Options configure a Collection. A nil *Options is valid and means the
// defaults.
type Options[T any] struct {
	// Codec encodes and decodes the documents. Every handle of one
	// collection must use the same codec. The default is codec.Msgpack[T],
	// naming struct fields as the store was created to: by msgpack tag,
	// else json tag, else Go name; on a store created at format 1, with
	// IgnoreJSONTags (msgpack tag, else Go name), as values were written
	// there (see package codec).
	Codec codec.Value[T]

	// KeepVersions, when above zero, bounds each document's history: a
	// Put, PutIf or Delete that makes a document hold more than
	// KeepVersions versions drops the oldest ones in the same batch, so
	// the bound holds at every commit, under any concurrency and across
	// restarts (the first write of a document after opening reads its
	// oldest version). The latest version is never dropped, so versions
	// are still never reused. Give every handle of a collection the same
	// value: each applies its own. The default is 0: keep every version.
	KeepVersions int

	// CacheEntries is how many documents the DB's version cache (shared by
	// every collection and feed of the DB) remembers at least: their
	// latest and oldest versions, so that a Put of a remembered document
	// reads nothing and its Latest is a point Get. Past it, the least
	// recently written documents are forgotten, and their next Put reads
	// the latest version first (one prefix seek). Each entry costs about
	// 410 bytes of Go heap with a 16-byte id (measured by
	// TestVersionCacheEntryCost), up to twice CacheEntries entries of it
	// in all (the cache keeps two generations), plus the table Latest
	// reads it through without a lock: 64 bytes a slot, 8 slots per entry
	// remembered while it grows, up to CacheEntries slots rounded up to a
	// power of two (4 MiB at the default, reached at 8,192 entries).
	// A document the DB only reads is remembered from its second Latest
	// on: the first is noted in a table of recent misses (4 bytes a slot,
	// 65,536 slots, 256 KiB, whatever CacheEntries), so that reads spread
	// over more documents than the cache holds do not pay for entries
	// forgotten unused. The cache grows to the largest value any handle of the DB asks for
	// and never shrinks. The default is 65,536.
	CacheEntries int

	// TTL, when above zero, gives every version this handle writes a time
	// to live: from TTL after its write (by the DB's clock, tipkv.Options.
	// Clock) the version reads as gone. Latest, Get and AsOf answer
	// ErrNotFound for it, History skips it, LatestAll and LatestMany skip a
	// document whose latest version has expired, and PutIf(..., 0) takes
	// such a document for missing. Every version keeps the expiry it was
	// written with, so a later TTL changes only later writes; give every
	// handle of a collection the same TTL. Watch still yields each version
	// once, as it is written. A TTL costs 8 bytes per version stored.
	//
	// Expired documents stay on disk until they are purged: a handle with
	// a TTL purges, in the background, every document of the collection
	// whose latest version has expired (see PurgeExpired and
	// PurgeInterval). A purge drops the whole history, so a document
	// written again afterwards starts at version 1 (see Purge); older
	// expired versions of a live document stay until KeepVersions, Prune or
	// the document's own expiry drops them.
	TTL time.Duration

	// PurgeInterval is the time between two passes of the background
	// purge of expired documents, which also passes once when the first
	// handle with a TTL on the collection is created: one purge per
	// collection and DB, however many handles. The default (0) is one
	// minute; below zero there is no background purge: call PurgeExpired.
	// Without a TTL there is none either.
	PurgeInterval time.Duration

	// MissFilter keeps, in memory, a Bloom filter of the collection's
	// documents (one per collection and DB, shared by its handles and kept
	// by the writes of every handle), so that Latest, AsOf, Get, Count and
	// LatestMany of a document that was never written answer without
	// reading the store: 0.14x raw Pebble's Get of a missing key, where
	// without it a miss is a prefix seek at about 0.5x a present Latest.
	// A "no" from it is certain (every write adds its document before it
	// can be applied); a "maybe" (about 1% of missing ids at 10 bits per
	// document, and every document purged since the build) reads the
	// store as without it.
	//
	// Memory: 10 to 20 bits (1.25 to 2.5 bytes) of Go heap per document,
	// 5 KiB at least; past its capacity it is built again at twice the
	// size in the background while it keeps answering. Time: the first
	// handle of a DB that asks for it builds it in NewCollection, walking
	// the collection with one seek per document and holding 8 bytes per
	// document meanwhile: about 1.5 s per 1,000,000 documents of 10
	// versions on disk right after open (BENCHMARKS.md, issue 14).
	// Writes then cost one hash and up to 8 atomic ORs more.
	//
	// Reads of a Snapshot or a Batch do not consult it. On a shared engine
	// (etcd, PostgreSQL: tipkv's storage Caps.Shared) other processes
	// create documents this DB never sees, so it does nothing there.
	MissFilter bool

	// ValueCache, when above zero, keeps the latest decoded version of the
	// collection's most read documents in memory, up to about this many
	// bytes, so that Latest of such a document is a lookup: no read of
	// the store and no decoding. An entry costs the stored value's size
	// (the encoded document and its header) plus its key plus about 160
	// bytes; the cache keeps two generations and drops the older when the
	// newer fills half of it.
	//
	// Latest returns the cached Doc itself: its Value is shared with every
	// other Latest that hits the entry, so a caller must not modify what
	// it holds (a []byte, a map, a slice field, what a pointer points
	// to). It is filled by Latest and never serves a version that is not
	// the document's latest at the call (see the package doc, "Value
	// cache"). Each handle keeps its own. On a shared engine (etcd,
	// PostgreSQL) other processes write documents this DB never sees, so
	// it does nothing there. The default is 0: none.
	ValueCache int64
}

// Collection is a named set of documents of type T, each a history of
// versions 1, 2, 3, ... that newest-first reads answer with one seek.
//
// A Collection is safe for concurrent use by many goroutines. Handles are
// cheap; any number of them, in any goroutines, may serve the same
// collection of one DB: the version counters they share live in the DB.
//
// Documents are identified by an id of 1 to MaxIDSize bytes, any bytes
// (0x00, 0xFF and invalid UTF-8 included); the Go string only carries them.
type Collection[T any] struct {
	db     *tipkv.DB
	store  engine.Store
	w      *writer
	name   string
	prefix []byte // 01 | name
	codec  codec.Value[T]
	shared bool  // the engine is shared: see shared.go
	keep   int64 // Options.KeepVersions
	ttl    time.Duration
	clock  func() time.Time
	fm     docfmt.Rules // how stored values read: the store's format (an older one only on a ReadOnly DB not yet upgraded)
	meters *collMeters

	ti      *timeIndex     // the collection's time index state (see timeindex.go)
	filter  *filterSlot    // Options.MissFilter (see filter.go), or nil
	values  *valueCache[T] // Options.ValueCache (see valuecache.go), or nil
	scratch sync.Pool      // of *T, to decode point reads into
	puts    sync.Pool      // of *putOp[T]
}

// NewCollection returns a handle on the collection called name in db. The
// name is 1 to MaxNameSize bytes, any bytes. Nothing is written until the
// first Put.
func NewCollection[T any](db *tipkv.DB, name string, opts *Options[T]) (*Collection[T], error) {
	if err := checkName("collection", name); err != nil {
		return nil, err
	}
	w, err := writerOf(db)
	if err != nil {
		return nil, err
	}
	s := w.ln.Store
	c := &Collection[T]{db: db, store: s, w: w, name: name, prefix: namePrefix(codec.FamilyVersions, name), shared: s.Caps().Shared}
	c.meters = w.collectionMeters(name)
	c.fm = docfmt.RulesOf(w.ln.Format)
	if opts != nil {
		if opts.KeepVersions < 0 {
			return nil, fmt.Errorf("%w: collection %q: KeepVersions %d", tipkv.ErrInvalid, name, opts.KeepVersions)
		}
		if opts.CacheEntries < 0 {
			return nil, fmt.Errorf("%w: collection %q: CacheEntries %d", tipkv.ErrInvalid, name, opts.CacheEntries)
		}
		if opts.TTL < 0 {
			return nil, fmt.Errorf("%w: collection %q: TTL %v", tipkv.ErrInvalid, name, opts.TTL)
		}
		if opts.ValueCache < 0 {
			return nil, fmt.Errorf("%w: collection %q: ValueCache %d", tipkv.ErrInvalid, name, opts.ValueCache)
		}
		c.codec, c.keep, c.ttl = opts.Codec, int64(opts.KeepVersions), opts.TTL
		w.grow(opts.CacheEntries)
		if opts.ValueCache > 0 && !c.shared {
			c.values = newValueCache[T](opts.ValueCache)
		}
	}
	if c.codec == nil {
		c.codec = codec.Msgpack[T]{IgnoreJSONTags: w.ln.LegacyNames}
	}
	c.clock = w.ln.Clock
	if c.ti, err = w.timeIndexOf(name); err != nil {
		return nil, err
	}
	if err := c.openFilter(opts != nil && opts.MissFilter); err != nil {
		return nil, err
	}
	if c.ttl > 0 && (opts.PurgeInterval >= 0) {
		if err := c.startPurger(opts.PurgeInterval); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Name returns the collection's name.
func (c *Collection[T]) Name() string { return c.name }

func (c *Collection[T]) docPrefix(dst []byte, id string) []byte {
	return codec.AppendString(append(dst, c.prefix...), id)
}

// Put writes doc as the next version of the document id and returns that
// version: 1 for a new document, latest+1 otherwise, a delete marker
// included (after a Delete at version 4 the next Put writes 5). Concurrent
// Puts of one document get dense, unique versions, in the order they
// commit. A version number is never used twice for one document, unless
// Purge drops its whole history.
//
// w is the DB, to commit the version at once, or the Batch of a DB.Update,
// to commit it with the rest of the Update. A Tx holds each document it
// writes from its first write of it until it commits or fails, and other
// writes of that document wait meanwhile; a version written in an Update
// that fails is given back (the next Put gets it).
//
// Inside an Update's function, pass the Batch. A write on the DB there is
// a Tx of its own: it commits on its own when no Update holds its
// document, waits when one that is committing does, and fails at once with
// ErrInvalid when an Update whose function is still running does (it may
// be the enclosing one, which would wait for it for ever). An Update that
// would wait for an Update waiting for it (two documents written in
// opposite orders) fails with ErrConflict instead: retry it.
//
// The version carries its commit time (Doc.Time): the DB's clock
// (tipkv.Options.Clock), read once per Update, so every version an Update
// writes has the same time; or, when that is not after the time of the
// document's latest version (a clock that stepped back, another process's
// clock ahead of this one's), 1 ns after it. Times therefore increase with
// versions within a document. Across documents nothing is ordered: two
// Updates, or two processes whose clocks disagree, may give a later
// version of one document an earlier time than a version of another. The
// encoding is stored as it is after a 10-byte header that holds the time
// (see the package doc, Storage).
//
// On a shared engine (see the package doc) the version is written on the
// condition that the latest is still the one it follows; if another
// process wrote first, the write runs again (on the DB alone; in an
// Update, with the Update's function). It reads the latest version when
// this DB has not written the document since it opened.
func (c *Collection[T]) Put(w tipkv.Writer, id string, doc T) (int64, error) {
	return c.put(w, id, doc, -1)
}

// PutIf is Put on the condition that the document's latest version is
// expected, a delete marker included: after a Delete at version 4, a stale
// PutIf(3) fails and PutIf(4) succeeds. expected 0 means that there is no
// live document: never written, purged, or deleted (its latest version is
// a delete marker). Otherwise it writes nothing and fails with
// ErrConflict. Inside an Update the condition counts the Update's own
// earlier writes.
//
// On a shared engine PutIf reads nothing when expected agrees with what
// this DB knows of the document or it knows nothing: the commit checks
// that the latest version is expected (for 0, that the document has no
// version), and if it is not, the write runs again, reads, and fails with
// ErrConflict. When what the DB knows disagrees, PutIf reads the store
// first. Its ErrConflict is always the store's answer.
func (c *Collection[T]) PutIf(w tipkv.Writer, id string, doc T, expected int64) (int64, error) {
	if expected < 0 {
		return 0, fmt.Errorf("%w: %s: expected version %d", tipkv.ErrInvalid, c.where(id), expected)
	}
	return c.put(w, id, doc, expected)
}

// putOp is one Put in progress: its encoded key and value, and the write
// it runs in the Tx. putOps are recycled, with run bound once, so a Put
// allocates neither a closure nor a buffer.
type putOp[T any] struct {
	c        *Collection[T]
	buf      []byte // prefix | desc(v) | value
	n        int    // length of the prefix
	id       string
	expected int64  // -1: unconditional
	expires  int64  // the version's expiry (Unix ns), 0 for none
	docAt    int    // where the encoded document starts in buf
	mbuf     []byte // the value again, with the Tx's metadata
	ibuf     []byte // the time index entry (see timeindex.go)
	v        int64  // the version written
	run      func(*link.Tx) error
}

func (c *Collection[T]) put(w tipkv.Writer, id string, doc T, expected int64) (int64, error) {
	op, err := c.newPut(id, doc, expected)
	if err != nil {
		return 0, err
	}
	defer c.freePut(op)
	if err := link.Write(w, op.run); err != nil {
		return 0, err
	}
	return op.v, nil
}

// newPut returns the putOp of a Put of doc as id, encoded, from the pool;
// freePut gives it back.
func (c *Collection[T]) newPut(id string, doc T, expected int64) (*putOp[T], error) {
	if err := checkID(c.name, id); err != nil {
		return nil, err
	}
	op, ok := c.puts.Get().(*putOp[T])
	if !ok {
		op = &putOp[T]{c: c}
		op.run = op.write
	}
	op.id, op.expected, op.v, op.expires = id, expected, 0, 0
	op.buf = c.docPrefix(op.buf[:0], id)
	op.n = len(op.buf)
	op.buf = codec.AppendDesc(op.buf, 0) // room for desc(version)
	if c.ttl > 0 {
		op.expires = c.clock().Add(c.ttl).UnixNano()
	}
	// The commit time is set in write, once the version it follows is
	// known. The header says where the document starts, so an encoding
	// that starts with C1 needs no escape.
	op.buf = docfmt.AppendVersion(op.buf, 1, false, op.expires, nil)
	op.docAt = len(op.buf)
	var err error
	if op.buf, err = c.codec.Append(op.buf, doc); err != nil {
		c.freePut(op)
		return nil, fmt.Errorf("%s: %w", c.where(id), err)
	}
	if err := checkValue(op.buf[op.n+codec.NumberSize:]); err != nil {
		c.freePut(op)
		return nil, fmt.Errorf("%s: %w", c.where(id), err)
	}
	return op, nil
}

func (c *Collection[T]) freePut(op *putOp[T]) {
	if cap(op.buf) <= 64<<10 && cap(op.mbuf) <= 64<<10 && cap(op.ibuf) <= 1<<10 {
		op.id = ""
		c.puts.Put(op)
	}
}

func (op *putOp[T]) write(tx *link.Tx) error {
	c := op.c
	prefix := op.buf[:op.n]
	e, err := c.lock(tx, prefix, op.id)
	if err != nil {
		return err
	}
	d := &e.tx
	if c.shared {
		return op.writeShared(tx, e)
	}
	latest, err := d.latestOf(c.store, prefix)
	if err != nil {
		return fmt.Errorf("%s: %w", c.where(op.id), err)
	}
	if op.expected >= 0 && latest != op.expected && (op.expected != 0 || !d.gone(c.clock)) {
		return op.conflict(d)
	}
	v := latest + 1
	codec.AppendDesc(prefix, v) // in place, in the room left for it
	key := op.buf[:op.n+codec.NumberSize]
	val, err := op.value(tx)
	if err != nil {
		return err
	}
	t := d.commitTime(tx)
	docfmt.SetTime(val, t)
	if err := tx.Batch.Set(key, val); err != nil {
		return err
	}
	if err := c.indexSet(tx, d, prefix, v, t, &op.ibuf); err != nil {
		return fmt.Errorf("%s: %w", c.where(op.id), err)
	}
	if latest == 0 {
		d.oldest, d.oldestKnown = 1, true
	}
	d.latest, d.deleted, d.expires, d.ltime, op.v = v, false, op.expires, t, v
	e.written++
	return c.retain(tx, e, prefix, op.id)
}

// value returns the stored value of the version op writes in tx: the one
// put built, or, when the write carries metadata (tipkv.WithMetadata,
// Batch.SetMetadata), the same with the metadata in its header.
func (op *putOp[T]) value(tx *link.Tx) ([]byte, error) {
	meta := tx.Meta()
	if meta == nil {
		return op.buf[op.n+codec.NumberSize:], nil
	}
	op.mbuf = append(docfmt.AppendVersion(op.mbuf[:0], 1, false, op.expires, meta), op.buf[op.docAt:]...)
	if err := checkValue(op.mbuf); err != nil {
		return nil, fmt.Errorf("%s: %w", op.c.where(op.id), err)
	}
	return op.mbuf, nil
}

// commitTime returns the commit time of the version a Tx writes after the
// view's latest one: the Tx's clock reading (link.Tx.Now), or 1 ns past
// the latest version's time when that is not before it, so that times
// increase with versions within a document whatever the clocks of the
// processes that wrote it. A version without a time (an older format's)
// does not count.
func (d *docState) commitTime(tx *link.Tx) int64 {
	t := tx.Now()
	if d.latest > 0 && d.ltime >= t {
		t = d.ltime + 1
	}
	return t
}

// retain drops the versions of the document under prefix beyond the
// newest c.keep, in the Tx that wrote its latest version (Options.
// KeepVersions). Most often that is one version, one point delete; see
// dropVersions.
func (c *Collection[T]) retain(tx *link.Tx, e *docEntry, prefix []byte, id string) error {
	d := &e.tx
	if c.keep <= 0 || d.latest <= c.keep {
		return nil
	}
	if d.oldestKnown && d.latest-d.oldest < c.keep {
		return nil
	}
	n, err := int64(0), c.unindex(tx, d, prefix, d.latest-c.keep)
	if err == nil {
		n, err = dropVersions(tx, c.store, d, prefix, d.latest-c.keep, c.shared)
	}
	e.removed += uint64(n)
	if err != nil {
		if c.shared {
			return c.failed(tx, id, err)
		}
		return fmt.Errorf("%s: %w", c.where(id), err)
	}
	return nil
}

func (op *putOp[T]) conflict(d *docState) error {
	what := ""
	switch {
	case d.deleted:
		what = " (a delete marker)"
	case d.gone(op.c.clock):
		what = " (expired)"
	}
	return fmt.Errorf("%w: %s: latest version is %d%s, expected %d", tipkv.ErrConflict, op.c.where(op.id), d.latest, what, op.expected)
}

// writeShared is write on a shared engine (see shared.go): the version
// written travels with a guard on the latest version it follows.
func (op *putOp[T]) writeShared(tx *link.Tx, e *docEntry) error {
	d := &e.tx
	c := op.c
	prefix := op.buf[:op.n]
	var latest int64
	var err error
	if op.expected < 0 {
		latest, err = d.latestShared(c.store, prefix)
	} else {
		var conflict bool
		latest, conflict, err = d.putIfLatest(c.store, prefix, op.expected, c.clock)
		if err == nil && conflict {
			return op.conflict(d)
		}
	}
	if err == nil {
		err = d.knowLatestValue(c.store, tx.Batch, prefix)
	}
	if err != nil {
		return c.failed(tx, op.id, err)
	}
	if err := d.guard(tx.Batch, prefix); err != nil {
		return err
	}
	v := latest + 1
	codec.AppendDesc(prefix, v)
	key := op.buf[:op.n+codec.NumberSize]
	val, err := op.value(tx)
	if err != nil {
		return err
	}
	t := d.commitTime(tx)
	docfmt.SetTime(val, t)
	if err := tx.Batch.Set(key, val); err != nil {
		return err
	}
	if err := c.indexSet(tx, d, prefix, v, t, &op.ibuf); err != nil {
		return c.failed(tx, op.id, err)
	}
	if latest == 0 {
		d.oldest, d.oldestKnown, d.sh.oldGuarded = 1, true, true
	}
	d.latest, d.deleted, d.expires, d.ltime, d.lval, op.v = v, false, op.expires, t, bytes.Clone(val), v
	e.written++
	return c.retain(tx, e, prefix, op.id)
}

// failed wraps the error of a write of id on a shared engine; a stale
// hint (errStale) also marks the Tx's hints for dropping, so that the rerun
// reads the store.
func (c *Collection[T]) failed(tx *link.Tx, id string, err error) error {
	if errors.Is(err, errStale) {
		if t, terr := c.w.txOf(tx); terr == nil {
			t.committing = true
		}
	}
	return fmt.Errorf("%s: %w", c.where(id), err)
}

// lock returns the Tx's view of the document under prefix, taking the
// document for the Tx at its first write of it.
func (c *Collection[T]) lock(tx *link.Tx, prefix []byte, id string) (*docEntry, error) {
	t, err := c.w.txOf(tx)
	if err != nil {
		return nil, err
	}
	e, err := t.lock(prefix)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(id), err)
	}
	e.meters = c.meters
	c.filterAdd(prefix)
	return e, nil
}

// Delete deletes the document id by writing a delete marker as its next
// version (latest+1), and returns the marker's version: the version
// History then shows for the marker. Its history stays, and version
// numbers are never reused. Afterwards Latest is ErrNotFound, and so are
// Get of the marker's version and AsOf of any version from it on; History
// shows the marker as a Doc with Deleted set; LatestAll and LatestMany
// skip the document. The next Put writes the version after the marker.
//
// Deleting a document that is missing, purged or already deleted writes
// nothing and is not an error: a missing or purged document returns 0 (it
// has no version), an already deleted one the version of the marker that
// deleted it (its latest version, unchanged). Prune drops a marker like
// any other version, but never the latest one; Purge drops the history,
// marker included. w is the DB or a Batch, as for Put: inside an Update
// the version returned is the one the Update commits, and a later Delete
// of the document in the same Update sees the marker and returns its
// version again. On a shared engine the marker, or the decision to write
// none, is checked at commit as Put's version is.
func (c *Collection[T]) Delete(w tipkv.Writer, id string) (int64, error) {
	return c.del(w, id, -1)
}

// DeleteIf is Delete on the condition that the document's latest version
// is expected (at least 1), and returns the delete marker's version:
// ErrConflict when the latest is another version, or when there is none
// (never written, or purged). When the latest is expected and already a
// delete marker, nothing is written and expected is returned. Inside an
// Update the condition counts the Update's own earlier writes. On a
// shared engine DeleteIf reads the document's latest version in its Tx,
// so its ErrConflict is the store's answer.
func (c *Collection[T]) DeleteIf(w tipkv.Writer, id string, expected int64) (int64, error) {
	if expected < 1 {
		return 0, fmt.Errorf("%w: %s: DeleteIf expected version %d", tipkv.ErrInvalid, c.where(id), expected)
	}
	return c.del(w, id, expected)
}

// del writes a delete marker after the latest version of id, when it is
// expected (-1: any) and live, and returns the latest version after it
// (0: the document has none).
func (c *Collection[T]) del(w tipkv.Writer, id string, expected int64) (int64, error) {
	if err := checkID(c.name, id); err != nil {
		return 0, err
	}
	prefix := c.docPrefix(nil, id)
	var marked int64
	err := link.Write(w, func(tx *link.Tx) error {
		e, err := c.lock(tx, prefix, id)
		if err != nil {
			return err
		}
		d := &e.tx
		var latest int64
		if c.shared {
			if expected > 0 && !d.sh.fresh && !d.sh.guarded {
				err = d.readLatest(c.store, prefix) // a conflict must be the store's answer
			}
			if err == nil {
				latest, err = d.latestShared(c.store, prefix)
			}
			if err == nil && !d.deleted {
				err = d.knowLatestValue(c.store, tx.Batch, prefix)
			}
			if err == nil {
				err = d.guard(tx.Batch, prefix) // a Delete that writes nothing is guarded too
			}
			if err != nil {
				return c.failed(tx, id, err)
			}
		} else if latest, err = d.latestOf(c.store, prefix); err != nil {
			return fmt.Errorf("%s: %w", c.where(id), err)
		}
		if expected > 0 && latest != expected {
			return fmt.Errorf("%w: %s: latest version is %d, expected %d", tipkv.ErrConflict, c.where(id), latest, expected)
		}
		marked = latest
		if latest == 0 || d.deleted {
			return nil
		}
		v := latest + 1
		t := d.commitTime(tx)
		marker := docfmt.AppendVersion(nil, t, true, 0, tx.Meta())
		if err := tx.Batch.Set(numberKey(prefix, v), marker); err != nil {
			return err
		}
		var ibuf []byte
		if err := c.indexSet(tx, d, prefix, v, t, &ibuf); err != nil {
			return c.failed(tx, id, err)
		}
		d.latest, d.deleted, d.expires, d.ltime = v, true, 0, t
		if c.shared {
			d.lval = marker
		}
		marked = v
		e.written++
		return c.retain(tx, e, prefix, id)
	})
	if err != nil {
		return 0, err
	}
	return marked, nil
}

// Purge drops every version of the document id, delete marker included,
// and returns how many it dropped. It is the one call after which version
// numbers start again at 1: a client that kept a version number or a
// cursor from before may then see other content under it, so prefer
// Delete unless the document must be gone entirely. A missing document
// drops nothing. w is the DB or a Batch, as for Put.
func (c *Collection[T]) Purge(w tipkv.Writer, id string) (int64, error) {
	return c.prune(w, id, func(_ *link.Tx, _ []byte, latest int64) (int64, error) { return latest, nil })
}

// Prune drops the versions of the document id older than its keepNewest
// newest ones, delete markers counted as versions (keepNewest >= 1: the
// latest version, marker or not, is never dropped). It returns how many
// versions it dropped; a missing document drops none.
//
// On a shared engine Prune, PruneBefore and Purge drop on the condition
// that the document's latest and oldest versions are those they counted
// from (the count they return is exact), with one range delete; if another
// process wrote first, they run again.
func (c *Collection[T]) Prune(w tipkv.Writer, id string, keepNewest int) (int64, error) {
	if keepNewest < 1 {
		return 0, fmt.Errorf("%w: %s: Prune must keep at least 1 version, not %d (Purge drops them all)", tipkv.ErrInvalid, c.where(id), keepNewest)
	}
	return c.prune(w, id, func(_ *link.Tx, _ []byte, latest int64) (int64, error) {
		return latest - int64(keepNewest), nil
	})
}

// PruneBefore drops the versions of the document id below v: [1, v). It
// never drops the latest version, marker or not, even when v is past it.
// It returns how many versions it dropped.
func (c *Collection[T]) PruneBefore(w tipkv.Writer, id string, v int64) (int64, error) {
	if v < 1 {
		return 0, fmt.Errorf("%w: %s: PruneBefore version %d", tipkv.ErrInvalid, c.where(id), v)
	}
	return c.prune(w, id, func(_ *link.Tx, _ []byte, latest int64) (int64, error) {
		return min(v, latest) - 1, nil
	})
}

// cutFunc returns the newest version a drop removes, given the document's
// latest version (not 0), its key prefix and the Tx, which holds the
// document: below 1 for none. An error aborts the Tx.
type cutFunc func(tx *link.Tx, prefix []byte, latest int64) (int64, error)

// prune drops the versions <= cut(latest): with point deletes or one range
// delete (see dropVersions), starting where the last drop ended.
func (c *Collection[T]) prune(w tipkv.Writer, id string, cut cutFunc) (int64, error) {
	if err := checkID(c.name, id); err != nil {
		return 0, err
	}
	prefix := c.docPrefix(nil, id)
	var dropped int64
	err := link.Write(w, func(tx *link.Tx) error {
		e, err := c.lock(tx, prefix, id)
		if err != nil {
			return err
		}
		d := &e.tx
		var latest int64
		if c.shared {
			if latest, err = d.latestShared(c.store, prefix); err == nil {
				err = d.guard(tx.Batch, prefix)
			}
		} else {
			latest, err = d.latestOf(c.store, prefix)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.where(id), err)
		}
		if latest == 0 {
			return nil
		}
		to, err := cut(tx, prefix, latest)
		if err != nil {
			return c.failed(tx, id, err)
		}
		if to < 1 {
			return nil
		}
		c.w.dropping(prefix, to >= latest) // for Watch: see watch.go
		if to >= latest {
			if err := c.raiseHorizon(tx, d, prefix); err != nil {
				return fmt.Errorf("%s: %w", c.where(id), err)
			}
		}
		if err := c.unindex(tx, d, prefix, to); err != nil {
			return c.failed(tx, id, err)
		}
		dropped, err = dropVersions(tx, c.store, d, prefix, to, c.shared)
		e.removed += uint64(dropped)
		if err != nil {
			return fmt.Errorf("%s: %w", c.where(id), err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return dropped, nil
}

// where names a document in errors.
func (c *Collection[T]) where(id string) string {
	return fmt.Sprintf("collection %q, id %q", c.name, id)
}
