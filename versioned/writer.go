package versioned

import (
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
)

// writer serialises, document by document, the writes of this package that
// read before they write (Put, PutIf, Delete, Purge, Prune, and the feed
// trims per stream), and remembers what it knows of recently written
// documents. There is one per DB, shared by every Collection and Feed
// handle of the DB.
//
// A Tx takes the lock of a document (a key prefix: a document, or a stream
// for the trims) at its first write of it and keeps it until the Tx is
// applied (visible to readers) or aborted, so:
//
//   - versions are dense: the version a Put reads is the newest committed
//     one plus the Tx's own writes, and no other Tx can allocate the next
//     one until this Tx has committed it or given it back by aborting;
//   - Txs that write different documents never wait for each other, and a
//     write on the DB inside an Update commits on its own unless it needs a
//     document the Update holds;
//   - the locks are released before the durability wait, so synced writes
//     of many goroutines still share Pebble's group commit.
//
// Waiting is the slow path, and the only one that looks further:
//
//   - a Tx that would wait for a Tx that (transitively) waits for it fails
//     with ErrConflict instead (two Updates writing two documents in
//     opposite orders), and gives its versions back when its Update fails;
//   - a write nested in an Update's function (its stack holds an enclosing
//     Update's frame) never waits for a holder whose function is still
//     running, which may be its own enclosing Update: it fails with
//     ErrInvalid, telling to pass the Batch;
//   - a waiter wakes with ErrClosed when the DB closes.
type writer struct {
	closing chan struct{} // closed when the DB closes
	onClose sync.Once
	// shared: the engine is shared (see shared.go); what the writer
	// knows is then a hint, dropped when a commit that held it fails.
	shared bool

	mu     sync.Mutex
	cache  versionCache // guarded by mu
	closed bool         // guarded by mu

	// What Watch needs to deliver durable versions only (see watch.go).
	// While watching > 0, every Tx that changes a document records it in
	// the document's entry (docEntry.pend) from the moment it is applied
	// until it is durable. A Tx applied while no Watch ran records
	// nothing and counts in unrecorded until it is durable; a new Watch
	// waits for that count to reach zero before it reads.
	watching     int           // guarded by mu
	drained      chan struct{} // guarded by mu: closed when unrecorded reaches 0
	unrecorded   atomic.Int64
	drainWaiters atomic.Int64

	ln     *link.DB // the DB's internals
	reg    *link.Registry
	meters map[string]*collMeters // guarded by mu: per collection name
	// filters: the miss filters, per collection name (see filter.go).
	filters map[string]*filterSlot // guarded by mu
	dbm     dbMeters

	// purges counts the whole-document drops whose Tx released its
	// documents: bumped under mu before the dropped state is visible
	// (valuecache.go).
	purges atomic.Uint64
}

type writerKey struct{}

func writerOf(db *tipkv.DB) (*writer, error) {
	ln, err := link.Of(db)
	if err != nil {
		return nil, err
	}
	reg := &ln.Services
	w := reg.Get(writerKey{}, func() any {
		return &writer{ln: ln, cache: newVersionCache(knobs.Versioned.CacheEntries), closing: make(chan struct{}), shared: ln.Caps.Shared, reg: reg}
	}).(*writer)
	// Not in Get's init: the registry is locked there.
	w.onClose.Do(func() {
		reg.OnClose(w.close)
		link.MetersOf[tipkv.Metrics](reg).Set(dbMetersKey{}, w.dbm.fill)
	})
	return w, nil
}

// close wakes every waiter, with ErrClosed.
func (w *writer) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.closing)
	}
}

// isClosed reports whether the DB has closed.
func (w *writer) isClosed() bool {
	select {
	case <-w.closing:
		return true
	default:
		return false
	}
}

// docState is what is known of one document (or, for the trims, one
// stream): its committed state in a docEntry, or a Tx's view counting its
// own writes.
type docState struct {
	latest      int64 // latest version, 0 if none; valid when latestKnown
	oldest      int64 // oldest version, 0 if none; valid when oldestKnown
	latestKnown bool
	oldestKnown bool
	deleted     bool  // the latest version is a delete marker
	expires     int64 // the latest version's expiry (Unix ns), 0 for none
	// ltime is the latest version's commit time (Unix ns): 0 when there
	// is none, it has none (an older format) or, on a shared engine, it
	// is not known exactly (lval nil).
	ltime int64
	// lval is, on a shared engine, the latest version's stored value, for
	// the guard that pins it (see shared.go); nil when not known.
	lval []byte

	// For a stream: no event of the stream is below low (0: unknown);
	// the trims applied before the Tx dropped every position <= trimmed
	// (since the DB was opened), and the Tx's trims every one <= cut. On
	// a shared engine low is 1 once a trim holds the stream, and trimmed
	// is how far the Tx's range deletes reach.
	low, trimmed, cut int64
	// mark is the stream's trim mark as the Tx's trims read it (markRead)
	// or wrote it (feed_mark.go).
	mark     int64
	markRead bool

	// sh is what a Tx knows on a shared engine (see shared.go).
	sh sharedView

	// The commit times of the versions the Tx wrote, when the collection
	// keeps a time index (see timeindex.go): itimes[i] is that of version
	// ibase+1+i. A Tx's own, cleared when it takes the document.
	ibase  int64
	itimes []int64
}

// docEntry is the writer's record of one document or stream: its lock and
// what is known of it. The committed state and the Tx view belong to the
// lock's holder; the lock fields are guarded by writer.mu.
type docEntry struct {
	key   string        // the key prefix, as in the cache's maps
	pub   atomic.Uint64 // the committed latest version, for readers (see hints)
	state docState      // committed
	tx    docState      // the holder's view
	// stream is set while a trim holds the entry of a stream, to update
	// the stream's low bound before the lock is released.
	stream *stream

	holder  *txWrites
	waiters int
	wake    chan struct{} // closed at release, made by the first waiter

	// For Watch (see watch.go), guarded by writer.mu. base is the
	// committed latest version (baseKnown: known) when the holder took
	// the lock; dropping is set while the holder drops versions. pend
	// holds, per Tx applied and not yet durable that changed the
	// document, the version up to which the document was durable before
	// it (0: unknown); changed is closed when such a Tx becomes durable.
	base      int64
	baseKnown bool
	dropped   bool // the holder drops versions
	dropping  bool // the holder drops every version
	watchers  int
	pend      []int64
	changed   chan struct{}

	// For DB.Metrics: the collection's meters, and the versions the
	// holder's Tx wrote and removed, added to them when it is applied.
	meters           *collMeters
	written, removed uint64
}

func (e *docEntry) pinned() bool {
	return e.holder != nil || e.waiters > 0 || e.watchers > 0 || len(e.pend) > 0
}

// versionCache maps a key prefix to its docEntry. It keeps two generations
// of at most max/2 entries each: when the current one is full it becomes
// the old one and the old one is dropped, so recently used entries survive
// and the size stays bounded without per-entry bookkeeping; an entry that
// is locked or waited for is never dropped (its lock would be lost). It is
// not safe for concurrent use.
type versionCache struct {
	cur, old map[string]*docEntry
	half     int
	hints    *hints
	// admit picks the reads that teach the cache (admit.go); read
	// without mu.
	admit *admission
	// epoch grows (under writer.mu) whenever what the cache knows may
	// have changed without a reader seeing it in an entry: a Tx released
	// documents, or entries were dropped. A read that learns a latest
	// version from the store (writer.learn) records it only if epoch has
	// not moved since before it read.
	epoch *atomic.Uint64
}

func newVersionCache(size int) versionCache {
	half := max(size/2, 1)
	h := &hints{seed: maphash.MakeSeed()}
	h.size(0) // grows with the entries (see entry)
	return versionCache{cur: make(map[string]*docEntry, half), old: make(map[string]*docEntry), half: half, hints: h, admit: newAdmission(size), epoch: new(atomic.Uint64)}
}

// entry returns k's entry, creating it, and moves it to the current
// generation.
func (c *versionCache) entry(k []byte) *docEntry {
	if e, ok := c.cur[string(k)]; ok {
		return e
	}
	e, ok := c.old[string(k)]
	if !ok {
		e = &docEntry{key: string(k)}
		c.hints.fit(len(c.cur)+len(c.old)+1, 2*c.half)
	}
	if len(c.cur) >= c.half {
		c.epoch.Add(1)
		c.old, c.cur = c.cur, c.old
		for k, e := range c.cur {
			if !e.pinned() {
				delete(c.cur, k)
				c.hints.retire(e)
			}
		}
	}
	c.cur[e.key] = e
	return e
}

// txWrites is a Tx's record of the documents and streams it holds. They are
// recycled, with their hooks bound once, so a Put allocates little.
type txWrites struct {
	w    *writer
	tx   *link.Tx
	held []*docEntry
	// last is the entry of the last lock call, to spare the writer's
	// mutex to a run of writes of one document.
	last    *docEntry
	lastKey []byte

	waitingFor *docEntry // guarded by writer.mu

	// On a shared engine: the Tx went to commit (its OnPrepare hooks
	// ran), or a write found its hints stale. If it then aborts, the
	// commit failed (or would have), and the hints of its documents are
	// dropped.
	committing bool

	onApplied, onAborted, onCommitted func()
	onPrepare                         func() error

	// The entries whose change this Tx recorded for Watch, with the
	// floor recorded in each; unrecorded: the Tx counts in
	// writer.unrecorded. Cleared when the Tx is durable.
	pending    []*docEntry
	floors     []int64
	unrecorded bool
}

type txWritesKey struct{}

var txWritesPool sync.Pool // of *txWrites

// errDeadlock is wrapped by the ErrConflict of a Tx that would wait for a
// Tx waiting for it.
var errDeadlock = errors.New("deadlock: another Update holds it and waits for a document or stream this Update holds; this Update's writes are given back when it fails, retry it")

// txOf returns the Tx's txWrites, creating it at the Tx's first call. It
// refuses a Tx of another DB.
func (w *writer) txOf(tx *link.Tx) (*txWrites, error) {
	if tx.DB != w.ln {
		return nil, fmt.Errorf("%w: the Batch belongs to another DB", tipkv.ErrInvalid)
	}
	return tx.State(txWritesKey{}, func() any {
		t, ok := txWritesPool.Get().(*txWrites)
		if !ok {
			t = &txWrites{}
			t.onApplied, t.onAborted, t.onCommitted = t.applied, t.aborted, t.committed
			t.onPrepare = func() error { t.committing = true; return nil }
		}
		t.w, t.tx = w, tx
		tx.OnApplied(t.onApplied)
		tx.OnAbort(t.onAborted)
		tx.OnCommit(t.onCommitted)
		if w.shared {
			tx.OnPrepare(t.onPrepare)
		}
		return t
	}).(*txWrites), nil
}

// lock returns the entry of the document or stream under prefix, taking
// its lock for the Tx at the Tx's first call, waiting for the Tx that holds
// it if any. The Tx's view (e.tx) is then its own until it ends.
func (t *txWrites) lock(prefix []byte) (*docEntry, error) {
	if t.last != nil && string(t.lastKey) == string(prefix) {
		return t.last, nil
	}
	w := t.w
	w.mu.Lock()
	e := w.cache.entry(prefix)
	nested := 0 // 1: the caller runs inside an enclosing Update; -1: not; 0: not looked
	for e.holder != t {
		if e.holder == nil {
			e.holder = t
			w.cache.hints.unpublish(e) // before the Tx can apply anything (see hints)
			e.tx = e.state
			e.tx.ibase, e.tx.itimes = 0, nil
			e.base, e.baseKnown, e.dropped, e.dropping = e.state.latest, e.state.latestKnown, false, false
			t.held = append(t.held, e)
			break
		}
		if w.closed {
			w.mu.Unlock()
			return nil, fmt.Errorf("%w: the DB closed while this write waited for another Update", tipkv.ErrClosed)
		}
		if e.holder.tx.Running() {
			if nested == 0 {
				// Reading the stack takes microseconds: not under the
				// mutex, with e pinned meanwhile. The loop looks at the
				// holder again after.
				e.waiters++
				w.mu.Unlock()
				nested = -1
				if insideEnclosingUpdate(t.tx.Running()) {
					nested = 1
				}
				w.mu.Lock()
				e.waiters--
				continue
			}
			if nested == 1 {
				w.mu.Unlock()
				return nil, fmt.Errorf("%w: a write on the DB inside DB.Update needs a document (or stream) that an Update whose function is still running holds, maybe the enclosing one: it would wait for ever; pass the *tipkv.Batch of the enclosing Update instead", tipkv.ErrInvalid)
			}
		}
		if t.waitsFor(e.holder) {
			w.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", tipkv.ErrConflict, errDeadlock)
		}
		if e.wake == nil {
			e.wake = make(chan struct{})
		}
		wake := e.wake
		e.waiters++
		t.waitingFor = e
		w.mu.Unlock()
		if knobs.Versioned.OnWait != nil {
			knobs.Versioned.OnWait()
		}
		select {
		case <-wake:
		case <-w.closing:
		}
		w.mu.Lock()
		e.waiters--
		t.waitingFor = nil
	}
	w.mu.Unlock()
	t.last, t.lastKey = e, append(t.lastKey[:0], prefix...)
	return e, nil
}

// waitsFor reports whether h, the holder t would wait for, waits for t,
// directly or through other waiting Txs. Every Tx waits for one entry at
// most, so the chain is a path. Called with writer.mu held.
func (t *txWrites) waitsFor(h *txWrites) bool {
	for range 1 << 20 {
		switch {
		case h == nil:
			return false
		case h == t:
			return true
		case h.waitingFor == nil:
			return false
		}
		h = h.waitingFor.holder
	}
	return false
}

// updateFn is the frame of the function of a running Update: the root
// package calls every Update function through it, and never inlines it.
const updateFn = "github.com/tipkv/tipkv.(*DB).runUpdateFn"

// insideEnclosingUpdate reports whether the caller's stack holds two frames
// of updateFn: one for the Update of its own Tx (a write on the DB runs in
// an Update of its own), one for an Update whose function it runs in.
func insideEnclosingUpdate(ownIsUpdate bool) bool {
	var pcs [64]uintptr
	seen, enough := 0, 1
	if ownIsUpdate {
		enough = 2 // the waiter's own Update function is on the stack too
	}
	for skip := 2; ; {
		n := runtime.Callers(skip, pcs[:])
		frames := runtime.CallersFrames(pcs[:n])
		for {
			f, more := frames.Next()
			if f.Function == updateFn {
				if seen++; seen == enough {
					return true
				}
			}
			if !more {
				break
			}
		}
		if n < len(pcs) {
			return false
		}
		skip += n
	}
}

// applied records the state of the Tx's documents, now visible, and
// releases them.
func (t *txWrites) applied() {
	for _, e := range t.held {
		if e.meters != nil && e.written|e.removed != 0 {
			e.meters.writes.Add(e.written)
			e.meters.removed.Add(e.removed)
		}
		e.written, e.removed = 0, 0
		if e.stream != nil {
			e.stream.trimApplied(e.tx.low, e.tx.cut)
		}
		if t.w.shared {
			// The Tx's own knowledge ends with it (a stream's trim state
			// is the Tx's only, see Feed.trimmer).
			e.tx.sh, e.tx.low, e.tx.trimmed, e.tx.cut = sharedView{}, 0, 0, 0
			if len(e.tx.lval) > maxKeptValue {
				e.tx.lval, e.tx.ltime = nil, 0 // the next write reads it
			}
		}
		e.state = e.tx
		e.state.itimes = nil
	}
	t.unlock(true)
}

// aborted releases the Tx's documents: their versions are given back. On a
// shared engine, if the commit failed (a guard, or an unknown outcome that
// may have applied it), what is known of them is dropped instead.
func (t *txWrites) aborted() {
	drop := t.w.shared && t.committing
	for _, e := range t.held {
		e.written, e.removed = 0, 0
		if e.stream != nil {
			e.stream.trimAborted()
		}
		if drop {
			e.drop()
		}
	}
	t.unlock(false)
	t.recycle()
}

// unlock unlocks the Tx's entries. After an applied Tx, it records for
// Watch the documents it changed, until committed runs.
func (t *txWrites) unlock(applied bool) {
	w := t.w
	w.mu.Lock()
	w.cache.epoch.Add(1)
	for i, e := range t.held {
		if applied && e.dropping {
			w.purges.Add(1) // before the drop is visible: see valuecache.go
		}
		if applied {
			if w.watching == 0 {
				t.unrecorded = true
			} else if e.dropped || !e.baseKnown || e.state.latest != e.base {
				floor := e.base
				if e.dropping || !e.baseKnown {
					floor = 0
				}
				e.pend = append(e.pend, floor)
				t.pending, t.floors = append(t.pending, e), append(t.floors, floor)
			}
		}
		e.holder, e.stream, e.tx, e.dropped, e.dropping = nil, nil, docState{}, false, false
		if !w.shared {
			w.cache.hints.publish(e)
		}
		if e.wake != nil {
			close(e.wake)
			e.wake = nil
		}
		t.held[i] = nil
	}
	if t.unrecorded {
		w.unrecorded.Add(1)
	}
	w.mu.Unlock()
}

// committed ends an applied Tx once it is durable: Watch may deliver what
// it changed.
func (t *txWrites) committed() {
	w := t.w
	if t.unrecorded && w.unrecorded.Add(-1) == 0 && w.drainWaiters.Load() > 0 {
		w.mu.Lock()
		if w.drained != nil {
			close(w.drained)
			w.drained = nil
		}
		w.mu.Unlock()
	}
	if len(t.pending) > 0 {
		w.mu.Lock()
		for i, e := range t.pending {
			if j := slices.Index(e.pend, t.floors[i]); j >= 0 {
				e.pend = slices.Delete(e.pend, j, j+1)
			}
			if e.changed != nil {
				close(e.changed)
				e.changed = nil
			}
			t.pending[i] = nil
		}
		w.mu.Unlock()
	}
	t.recycle()
}

// grow makes the version cache remember at least n documents.
func (w *writer) grow(n int) {
	w.mu.Lock()
	w.cache.half = max(w.cache.half, (n+1)/2)
	w.mu.Unlock()
}

// knownLocked returns the latest version of the document under prefix,
// and whether it is a delete marker, when the cache knows it and no Tx
// holds the document (ok). On an exclusive engine that is the store's
// latest version: an entry's state changes only when a Tx holding it is
// applied. Latest asks the hints first (see hints), without the mutex,
// and this only for a document they do not hold; the entry found here
// goes back to its slot if the slot is free (the table grew since it was
// published), so a document read often is read without the mutex again.
func (w *writer) knownLocked(prefix []byte) (latest int64, deleted, ok bool) {
	w.mu.Lock()
	e, found := w.cache.cur[string(prefix)]
	if !found {
		e, found = w.cache.old[string(prefix)]
	}
	if found && e.holder == nil && e.state.latestKnown {
		latest, deleted, ok = e.state.latest, e.state.deleted, true
		if !w.shared {
			w.cache.hints.adopt(e)
		}
	}
	w.mu.Unlock()
	return latest, deleted, ok
}

// learn records v, read from the store as the latest version of the
// document under prefix with its stored value raw, in the version cache
// and its hints, so that a document a DB only reads (after a restart, or
// written by an earlier process) is read with a point Get from then on,
// as one it wrote is. Reads call it on a document's second miss, not its
// first (see admission). epoch is the cache's epoch loaded before the read's
// iterator was made. On an exclusive engine every version is written by a
// Tx that holds the document's entry until after the version is visible
// and bumps the epoch when it releases it, and an entry leaves the cache
// only with a bump too; so if the epoch has not moved and the document's
// entry is absent, or present, not held and not known, no version was
// written since the read's snapshot, and v is still the latest. Anything
// else (a write anywhere in the DB meanwhile) and learn records nothing:
// the next read tries again. Misses are not recorded (the miss filter is
// for them, and a cache of ids that do not exist would be a cache anyone
// could fill). raw must be read by the current format's rules.
func (w *writer) learn(prefix []byte, epoch uint64, v int64, raw []byte) {
	if w.shared {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.cache.epoch.Load() != epoch {
		return
	}
	e, found := w.cache.cur[string(prefix)]
	if !found {
		e, found = w.cache.old[string(prefix)]
	}
	if found && (e.holder != nil || e.state.latestKnown) {
		return
	}
	if !found {
		e = w.cache.entry(prefix)
	}
	ver := docfmt.Rules{}.Parse(raw)
	s := &e.state
	s.latest, s.deleted, s.expires, s.ltime, s.latestKnown = v, ver.Deleted, ver.Expires, ver.Time, true
	w.cache.hints.publish(e)
}

// dropping marks the entry under prefix, which the caller's Tx holds, as
// losing versions (a Watch is told when that is durable), and with purge
// every version: a Watch must then not take versions written after it for
// the ones it had seen (see watch.go).
func (w *writer) dropping(prefix []byte, purge bool) {
	w.mu.Lock()
	e, ok := w.cache.cur[string(prefix)]
	if !ok {
		e, ok = w.cache.old[string(prefix)] // held: pinned, so in one of them
	}
	if ok {
		e.dropped = true
		e.dropping = e.dropping || purge
	}
	w.mu.Unlock()
}

// recycle returns t to the pool: the Tx is over. If the durability wait
// of an applied Tx fails, neither committed nor aborted runs and t is
// left to the garbage collector, with its records (see writer): a Watch
// of its documents then waits for ever, the safe side (Pebble refuses
// every write after a failed WAL sync).
func (t *txWrites) recycle() {
	t.w, t.tx, t.held, t.last, t.lastKey, t.committing = nil, nil, t.held[:0], nil, t.lastKey[:0], false
	t.pending, t.floors, t.unrecorded = t.pending[:0], t.floors[:0], false
	txWritesPool.Put(t)
}
