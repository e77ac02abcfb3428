package versioned

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
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
}

type writerKey struct{}

func writerOf(db *tipkv.DB) (*writer, error) {
	reg, err := link.Services(db)
	if err != nil {
		return nil, err
	}
	s, err := link.Store(db)
	if err != nil {
		return nil, err
	}
	w := reg.Get(writerKey{}, func() any {
		return &writer{cache: newVersionCache(cacheEntries), closing: make(chan struct{}), shared: s.Caps().Shared}
	}).(*writer)
	// Not in Get's init: the registry is locked there.
	w.onClose.Do(func() { reg.OnClose(w.close) })
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

// cacheEntries bounds the cache of a DB opened afterwards: about 200 bytes
// each. A variable for tests only.
var cacheEntries = 1 << 16

// docState is what is known of one document (or, for the trims, one
// stream): its committed state in a docEntry, or a Tx's view counting its
// own writes.
type docState struct {
	latest      int64 // latest version, 0 if none; valid when latestKnown
	oldest      int64 // oldest version, 0 if none; valid when oldestKnown
	latestKnown bool
	oldestKnown bool
	deleted     bool // the latest version is a delete marker

	// For a stream: no event of the stream is below low (0: unknown);
	// the trims applied before the Tx dropped every position <= trimmed
	// (since the DB was opened), and the Tx's trims every one <= cut. On
	// a shared engine low is 1 once a trim holds the stream, and trimmed
	// is how far the Tx's range deletes reach.
	low, trimmed, cut int64

	// sh is what a Tx knows on a shared engine (see shared.go).
	sh sharedView
}

// docEntry is the writer's record of one document or stream: its lock and
// what is known of it. The committed state and the Tx view belong to the
// lock's holder; the lock fields are guarded by writer.mu.
type docEntry struct {
	state docState // committed
	tx    docState // the holder's view
	// stream is set while a trim holds the entry of a stream, to update
	// the stream's low bound before the lock is released.
	stream *stream

	holder  *txWrites
	waiters int
	wake    chan struct{} // closed at release, made by the first waiter
}

func (e *docEntry) pinned() bool { return e.holder != nil || e.waiters > 0 }

// versionCache maps a key prefix to its docEntry. It keeps two generations
// of at most max/2 entries each: when the current one is full it becomes
// the old one and the old one is dropped, so recently used entries survive
// and the size stays bounded without per-entry bookkeeping; an entry that
// is locked or waited for is never dropped (its lock would be lost). It is
// not safe for concurrent use.
type versionCache struct {
	cur, old map[string]*docEntry
	half     int
}

func newVersionCache(size int) versionCache {
	half := max(size/2, 1)
	return versionCache{cur: make(map[string]*docEntry, half), old: make(map[string]*docEntry), half: half}
}

// entry returns k's entry, creating it, and moves it to the current
// generation.
func (c *versionCache) entry(k []byte) *docEntry {
	if e, ok := c.cur[string(k)]; ok {
		return e
	}
	e, ok := c.old[string(k)]
	if !ok {
		e = &docEntry{}
	}
	if len(c.cur) >= c.half {
		c.old, c.cur = c.cur, c.old
		for k, e := range c.cur {
			if !e.pinned() {
				delete(c.cur, k)
			}
		}
	}
	c.cur[string(k)] = e
	return e
}

// txWrites is a Tx's record of the documents and streams it holds. They are
// recycled, with their hooks bound once, so a Put allocates little.
type txWrites struct {
	w    *writer
	tx   *storage.Tx
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

	onApplied, onAborted func()
	onPrepare            func() error
}

type txWritesKey struct{}

// onWait, when set (by tests only), is called by every write that starts
// waiting for another Tx.
var onWait func()

var txWritesPool sync.Pool // of *txWrites

// errDeadlock is wrapped by the ErrConflict of a Tx that would wait for a
// Tx waiting for it.
var errDeadlock = errors.New("deadlock: another Update holds it and waits for a document or stream this Update holds; this Update's writes are given back when it fails, retry it")

// txOf returns the Tx's txWrites, creating it at the Tx's first call. It
// refuses a Tx of another DB.
func (w *writer) txOf(db *tipkv.DB, tx *storage.Tx) (*txWrites, error) {
	if tx.Owner != db {
		return nil, fmt.Errorf("%w: the Batch belongs to another DB", tipkv.ErrInvalid)
	}
	return tx.State(txWritesKey{}, func() any {
		t, ok := txWritesPool.Get().(*txWrites)
		if !ok {
			t = &txWrites{}
			t.onApplied, t.onAborted = t.applied, t.aborted
			t.onPrepare = func() error { t.committing = true; return nil }
		}
		t.w, t.tx = w, tx
		tx.OnApplied(t.onApplied)
		tx.OnAbort(t.onAborted)
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
			e.tx = e.state
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
		if onWait != nil {
			onWait()
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
		if e.stream != nil {
			e.stream.trimApplied(e.tx.low, e.tx.cut)
		}
		if t.w.shared {
			// The Tx's own knowledge ends with it (a stream's trim state
			// is the Tx's only, see Feed.trimmer).
			e.tx.sh, e.tx.low, e.tx.trimmed, e.tx.cut = sharedView{}, 0, 0, 0
		}
		e.state = e.tx
	}
	t.release()
}

// aborted releases the Tx's documents: their versions are given back. On a
// shared engine, if the commit failed (a guard, or an unknown outcome that
// may have applied it), what is known of them is dropped instead.
func (t *txWrites) aborted() {
	drop := t.w.shared && t.committing
	for _, e := range t.held {
		if e.stream != nil {
			e.stream.trimAborted()
		}
		if drop {
			e.drop()
		}
	}
	t.release()
}

// release unlocks the Tx's entries and recycles t: the Tx is over.
func (t *txWrites) release() {
	w := t.w
	w.mu.Lock()
	for i, e := range t.held {
		e.holder, e.stream, e.tx = nil, nil, docState{}
		if e.wake != nil {
			close(e.wake)
			e.wake = nil
		}
		t.held[i] = nil
	}
	w.mu.Unlock()
	t.w, t.tx, t.held, t.last, t.lastKey, t.committing = nil, nil, t.held[:0], nil, t.lastKey[:0], false
	txWritesPool.Put(t)
}
