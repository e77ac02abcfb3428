package versioned

import (
	"fmt"
	"sync"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
)

// writer serialises the writes of this package that read before they write
// (Put, PutIf, Delete, Prune, Trim) on one DB, and remembers the latest
// version of recently written documents. There is one per DB, shared by
// every Collection and Feed handle of the DB.
//
// A write Tx takes mu at its first such write and keeps it until the Tx is
// applied (visible to readers) or aborted, so:
//
//   - versions are dense: the version a Put reads is the newest committed
//     one plus the Tx's own writes, and no other Tx can allocate the next
//     one until this Tx has committed it or given it back by aborting;
//   - a Tx takes one lock only, so Txs cannot deadlock with each other;
//   - the lock is released before the durability wait, so synced writes of
//     many goroutines still share Pebble's group commit.
//
// The cost: the writes of a whole DB.Update that calls Put hold the lock
// while the Update's function runs, and a Put made on the DB (not the
// Batch) inside that function waits for it forever.
type writer struct {
	mu    sync.Mutex
	cache versionCache // guarded by mu
}

type writerKey struct{}

func writerOf(db *tipkv.DB) (*writer, error) {
	reg, err := link.Services(db)
	if err != nil {
		return nil, err
	}
	return reg.Get(writerKey{}, func() any { return &writer{cache: newVersionCache(cacheEntries)} }).(*writer), nil
}

// cacheEntries bounds the latest-version cache of a DB opened afterwards:
// about 100 bytes each. A variable for tests only.
var cacheEntries = 1 << 16

// versionCache maps a document's key prefix to its latest version. It keeps
// two generations of at most max/2 entries each: when the current one is
// full it becomes the old one and the old one is dropped, so recently used
// entries survive and the size stays bounded without per-entry
// bookkeeping. Entries are pointers so that updating a cached document
// allocates nothing. It is not safe for concurrent use.
type versionCache struct {
	cur, old map[string]*cacheEntry
	half     int
}

type cacheEntry struct{ v int64 }

func newVersionCache(max int) versionCache {
	half := max / 2
	return versionCache{cur: make(map[string]*cacheEntry, half), old: make(map[string]*cacheEntry), half: half}
}

func (c *versionCache) get(k []byte) (int64, bool) {
	if e := c.entry(k); e != nil {
		return e.v, true
	}
	return 0, false
}

func (c *versionCache) put(k []byte, v int64) {
	if e := c.entry(k); e != nil {
		e.v = v
		return
	}
	c.add(string(k), &cacheEntry{v})
}

// entry finds k's entry, moving it to the current generation.
func (c *versionCache) entry(k []byte) *cacheEntry {
	if e, ok := c.cur[string(k)]; ok {
		return e
	}
	if e, ok := c.old[string(k)]; ok {
		c.add(string(k), e)
		return e
	}
	return nil
}

func (c *versionCache) add(k string, e *cacheEntry) {
	if len(c.cur) >= c.half {
		c.old, c.cur = c.cur, c.old
		clear(c.cur)
	}
	c.cur[k] = e
}

// txWrites is a Tx's view of the documents and streams it read-modify-writes
// while it holds the writer lock. Most Txs touch one document, kept inline;
// txWrites are recycled, with their hooks bound once, so a Put allocates
// little.
type txWrites struct {
	w        *writer
	locked   bool
	firstKey []byte // key prefix of the first document; the buffer is reused
	first    docState
	more     map[string]*docState // the other documents, by key prefix

	onApplied, onAborted func()
}

// docState is what a Tx knows of one document (or stream), counting its own
// writes.
type docState struct {
	latest      int64 // latest version; valid when latestKnown
	oldest      int64 // oldest remaining version or position, 0 if none; valid when oldestKnown
	latestKnown bool
	oldestKnown bool
}

type txWritesKey struct{}

var txWritesPool sync.Pool // of *txWrites

func newTxWrites() any {
	if t, ok := txWritesPool.Get().(*txWrites); ok {
		return t
	}
	t := &txWrites{}
	t.onApplied, t.onAborted = t.applied, t.aborted
	return t
}

// lock returns the Tx's txWrites, taking the writer lock at the Tx's first
// call. It refuses a Tx of another DB.
func (w *writer) lock(db *tipkv.DB, tx *storage.Tx) (*txWrites, error) {
	if tx.Owner != db {
		return nil, fmt.Errorf("%w: the Batch belongs to another DB", tipkv.ErrInvalid)
	}
	t := tx.State(txWritesKey{}, newTxWrites).(*txWrites)
	if !t.locked {
		w.mu.Lock()
		t.w, t.locked = w, true
		tx.OnApplied(t.onApplied)
		tx.OnAbort(t.onAborted)
	}
	return t, nil
}

// applied records the Tx's latest versions, now visible, and releases.
func (t *txWrites) applied() {
	if len(t.firstKey) > 0 && t.first.latestKnown {
		t.w.cache.put(t.firstKey, t.first.latest)
	}
	for k, d := range t.more {
		if d.latestKnown {
			t.w.cache.put([]byte(k), d.latest)
		}
	}
	t.release()
}

func (t *txWrites) aborted() { t.release() }

// release unlocks the writer and recycles t: the Tx is over.
func (t *txWrites) release() {
	w := t.w
	t.w, t.locked, t.firstKey, t.first, t.more = nil, false, t.firstKey[:0], docState{}, nil
	w.mu.Unlock()
	txWritesPool.Put(t)
}

func (t *txWrites) doc(prefix []byte) *docState {
	switch {
	case len(t.firstKey) == 0:
		t.firstKey = append(t.firstKey, prefix...)
		return &t.first
	case string(t.firstKey) == string(prefix):
		return &t.first
	}
	if d, ok := t.more[string(prefix)]; ok {
		return d
	}
	if t.more == nil {
		t.more = make(map[string]*docState)
	}
	d := &docState{}
	t.more[string(prefix)] = d
	return d
}

// latest returns the document's latest version, 0 if it has none, from the
// Tx, the cache or the store.
func (t *txWrites) latest(s storage.Store, d *docState, prefix []byte) (int64, error) {
	if d.latestKnown {
		return d.latest, nil
	}
	v, ok := t.w.cache.get(prefix)
	if !ok {
		var err error
		if v, err = newestNumber(s, prefix); err != nil {
			return 0, err
		}
	}
	d.latest, d.latestKnown = v, true
	return v, nil
}

// oldest returns the oldest version or position under prefix, 0 if none.
func (t *txWrites) oldest(s storage.Store, d *docState, prefix []byte) (int64, error) {
	if d.oldestKnown {
		return d.oldest, nil
	}
	n, err := oldestNumber(s, prefix)
	if err != nil {
		return 0, err
	}
	d.oldest, d.oldestKnown = n, true
	return n, nil
}

// dropThrough deletes every version or position <= cut under prefix with
// one range delete, [prefix|desc(cut), prefix|desc(oldest-1)): it starts at
// the oldest remaining one, so it never overlaps an earlier drop. It returns
// how many numbers the range spans (versions are dense, so for a document
// that is how many versions it dropped).
func (t *txWrites) dropThrough(tx *storage.Tx, s storage.Store, d *docState, prefix []byte, cut int64) (int64, error) {
	oldest, err := t.oldest(s, d, prefix)
	if err != nil {
		return 0, err
	}
	if oldest == 0 || cut < oldest {
		return 0, nil
	}
	lo := numberKey(prefix, cut)
	hi := numberKey(prefix, oldest-1)
	if err := deleteRange(tx, lo, hi); err != nil {
		return 0, err
	}
	d.oldest = cut + 1
	if d.latestKnown && d.latest <= cut {
		d.oldest = 0
	}
	return cut - oldest + 1, nil
}
