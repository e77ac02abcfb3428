package versioned

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
)

// The time index of a collection: optional, durable, per collection.
//
// Without it, a read by time searches a document's versions (bytime.go:
// about 2 + log2(versions) seeks). With it, every version of the
// collection, delete markers included, has an entry keyed by its commit
// time, newest first, whose value is the version:
//
//	0D | collection | id | desc(time)  ->  asc(version)
//	0D | collection | "" | desc(0)     ->  the index's state: 01 building, 02 on
//
// so the version latest at t is the first entry at or after desc(t): one
// seek. No document has the empty id, so the state key is no entry; it
// sorts first among the collection's keys, and DisableTimeIndex removes
// the state and every entry with one range delete. Versions without a
// commit time (written before store format 4) have no entry.
//
// A read by time with the index (AsOfTime, and the search step of
// HistoryBetween, LatestAllAsOf and ChangedBetween) seeks the entry at or
// before t, then reads the version it names and the one after it in one
// seek and one step of an iterator over the document's versions, and
// takes the answer only if those versions say so themselves: the version
// is stored with the entry's time, and the version after it, if any, is
// after t. Times increase with versions within a document, so that is
// the answer whatever the index holds; anything else (no entry, an entry
// of a version dropped meanwhile in a snapshot read, an index still
// being built) falls back to the search, which also gives the typed
// answers for none, ErrPruned and ErrUntimed. The index can make a read
// fast, never wrong.
//
// Every write keeps it exact in the batch that changes the versions:
// Put, PutIf, Revert and Undelete set the entry of the version they
// write, Delete and DeleteIf that of the marker; KeepVersions, Prune,
// PruneBefore, Purge and the purge of expired documents delete the
// entries of the versions they drop (point deletes of the entries found
// by reading the dropped versions' times, for fewer than
// knobs.Versioned.DropRangeMin versions on an exclusive engine; else one
// range delete from the newest dropped version's time; a whole document's
// entries with one range delete). An Update that runs again writes them
// again in its new batch, once.
//
// Enabling (EnableTimeIndex) writes the state "building", from which
// every write keeps the index, then fills it for the versions already
// stored, document by document in bounded batches, each holding the
// document as a write does, and writes "on": reads use the index only
// from then on. An EnableTimeIndex that stopped (an error, ctx, a crash)
// leaves "building"; calling it again resumes by filling again (entries
// are written idempotently). DisableTimeIndex removes the state and the
// entries in one batch.
//
// Every handle of the DB learns the state from the store when the
// collection is first opened in the DB, and from EnableTimeIndex and
// DisableTimeIndex in this process. On an exclusive engine that is
// exact: a change of state first waits for every Tx of this process that
// holds a document of the collection (and so may have decided under the
// old state) to end. On a shared engine another process learns the change
// when it next reads the state: a process re-reads it at a write when its
// reading is older than the engine's poll interval (Caps.PollInterval);
// writes that keep the index require, at commit, that the state is still
// the one they read, so a DisableTimeIndex elsewhere makes them run again;
// and EnableTimeIndex waits two poll intervals (250 ms each on an engine
// that watches) after writing "building" before it fills, so that every
// process keeps the index by then. A write slower than that may leave a version
// without an entry: the reads stay right (see above), and tipkv check
// reports the missing entry.

// TimeIndexState is the state of a collection's time index.
type TimeIndexState int

const (
	// TimeIndexOff: the collection has no time index. The default.
	TimeIndexOff TimeIndexState = iota
	// TimeIndexBuilding: EnableTimeIndex has begun and not finished;
	// writes keep the index, reads do not use it.
	TimeIndexBuilding
	// TimeIndexOn: writes keep the index and reads by time use it.
	TimeIndexOn
)

// String names the state: "off", "building" or "on".
func (s TimeIndexState) String() string {
	switch s {
	case TimeIndexOff:
		return "off"
	case TimeIndexBuilding:
		return "building"
	case TimeIndexOn:
		return "on"
	}
	return fmt.Sprintf("TimeIndexState(%d)", int(s))
}

// timeIndex is what a DB knows of one collection's time index, shared by
// every handle of the collection in the DB (writer.tindex).
type timeIndex struct {
	key []byte // the state key: 0D | collection | "" | desc(0)

	state atomic.Int32 // a TimeIndexState
	// readAt is when state was read from the store (time.Now, Unix ns),
	// on a shared engine; 0 forces a read.
	readAt atomic.Int64

	mu sync.Mutex // serialises EnableTimeIndex and DisableTimeIndex in this process
}

type timeIndexKey struct{ collection string }

// indexPrefixOf returns the prefix of the collection's time index keys.
func indexPrefixOf(coll string) []byte { return namePrefix(codec.FamilyTimeIndex, coll) }

// indexStateKey returns the key of the collection's time index state.
func indexStateKey(coll string) []byte {
	return codec.AppendDesc(codec.AppendString(indexPrefixOf(coll), ""), 0)
}

// indexDocPrefix returns the prefix of the index entries of the document
// whose version prefix is prefix (01 | collection | id): the same bytes
// under family 0x0D, in a new slice.
func indexDocPrefix(dst, prefix []byte) []byte {
	dst = append(dst, prefix...)
	dst[len(dst)-len(prefix)] = byte(codec.FamilyTimeIndex)
	return dst
}

// parseIndexState decodes a state key's value.
func parseIndexState(v []byte) (TimeIndexState, error) {
	if len(v) == 1 && (v[0] == byte(TimeIndexBuilding) || v[0] == byte(TimeIndexOn)) {
		return TimeIndexState(v[0]), nil
	}
	return 0, fmt.Errorf("%w: time index state %x", tipkv.ErrCorrupt, v)
}

// readIndexState reads the collection's index state from r.
func readIndexState(r engine.Reader, key []byte) (TimeIndexState, error) {
	v, err := r.Get(key)
	if errors.Is(err, engine.ErrNotFound) {
		return TimeIndexOff, nil
	}
	if err != nil {
		return 0, err
	}
	return parseIndexState(v)
}

// timeIndexOf returns the DB's record of the collection's time index,
// reading its state the first time.
func (w *writer) timeIndexOf(coll string) (*timeIndex, error) {
	ti := w.reg.Get(timeIndexKey{coll}, func() any { return &timeIndex{key: indexStateKey(coll)} }).(*timeIndex)
	if ti.readAt.Load() == 0 {
		if err := ti.refresh(w.ln.Store); err != nil {
			return nil, fmt.Errorf("collection %q: time index state: %w", coll, err)
		}
	}
	return ti, nil
}

// refresh reads the state from the store.
func (ti *timeIndex) refresh(s engine.Reader) error {
	st, err := readIndexState(s, ti.key)
	if err != nil {
		return err
	}
	ti.state.Store(int32(st))
	ti.readAt.Store(time.Now().UnixNano())
	return nil
}

// indexState returns the state a write acts on: on a shared engine read
// again when the last reading is older than the engine's poll interval.
func (c *Collection[T]) indexState() (TimeIndexState, error) {
	ti := c.ti
	if c.shared && time.Now().UnixNano()-ti.readAt.Load() > int64(c.pollInterval()) {
		if err := ti.refresh(c.store); err != nil {
			return 0, fmt.Errorf("collection %q: time index state: %w", c.name, err)
		}
	}
	return TimeIndexState(ti.state.Load()), nil
}

// pollInterval is how old a shared engine's reading of the state may get
// before a write reads it again: the engine's poll interval, or 250 ms
// on an engine that watches. Each process measures it by its own clock,
// so clock skew between processes does not matter, only their rates.
func (c *Collection[T]) pollInterval() time.Duration {
	if p := c.store.Caps().PollInterval; p > 0 {
		return p
	}
	return 250 * time.Millisecond
}

// txIndex is a Tx's decision about one collection's index: taken at its
// first write of the collection and kept for the Tx.
type txIndex struct{ keep bool }

type txIndexKey struct{ collection string }

// indexing reports whether the writes of tx must keep the collection's
// time index. On a shared engine a Tx that keeps it requires the state
// it read at commit, and a Tx that fails marks the reading stale.
func (c *Collection[T]) indexing(tx *link.Tx) (bool, error) {
	var err error
	ix := tx.State(txIndexKey{c.name}, func() any {
		st, rerr := c.indexState()
		if rerr != nil {
			err = rerr
			return (*txIndex)(nil)
		}
		x := &txIndex{keep: st != TimeIndexOff}
		if x.keep && c.shared {
			if rerr := tx.Batch.Require(engine.Equals(c.ti.key, []byte{byte(st)})); rerr != nil {
				err = rerr
				return (*txIndex)(nil)
			}
			ti := c.ti
			tx.OnAbort(func() { ti.readAt.Store(0) })
		}
		return x
	}).(*txIndex)
	if err != nil {
		return false, err
	}
	if ix == nil {
		return false, fmt.Errorf("collection %q: the time index state could not be read earlier in this Update", c.name)
	}
	return ix.keep, nil
}

// indexSet adds to tx the entry of version v of the document under prefix,
// committed at t, when the collection keeps its index; buf is scratch.
func (c *Collection[T]) indexSet(tx *link.Tx, d *docState, prefix []byte, v, t int64, buf *[]byte) error {
	keep, err := c.indexing(tx)
	if err != nil || !keep {
		return err
	}
	b := codec.AppendDesc(indexDocPrefix((*buf)[:0], prefix), t)
	k := len(b)
	b = codec.AppendAsc(b, v)
	*buf = b
	if d.itimes == nil || d.ibase+int64(len(d.itimes)) != v-1 {
		d.ibase, d.itimes = v-1, d.itimes[:0]
	}
	d.itimes = append(d.itimes, t)
	return tx.Batch.Set(b[:k], b[k:])
}

// timeOfVersion returns the commit time of version v of the document
// under prefix, as the Tx sees it: from the Tx's own writes, or read.
func (c *Collection[T]) timeOfVersion(d *docState, prefix []byte, v int64) (int64, error) {
	if i := v - d.ibase - 1; d.itimes != nil && i >= 0 && i < int64(len(d.itimes)) {
		return d.itimes[i], nil
	}
	raw, err := c.store.Get(numberKey(prefix, v))
	if errors.Is(err, engine.ErrNotFound) && c.shared {
		return 0, errStale
	}
	if err != nil {
		return 0, fmt.Errorf("version %d: %w", v, err)
	}
	return c.fm.Parse(raw).Time, nil
}

// unindex adds to tx the deletes of the index entries of versions
// [oldest, cut] of the document under prefix, about to be dropped, when
// the collection keeps its index. d is the Tx's view, its latest known.
//
// Like dropVersions, it deletes fewer than knobs.Versioned.DropRangeMin
// entries with point deletes on an exclusive engine, reading the dropped
// versions' times with one iterator (a memtable full of short range
// tombstones slows every read: see drop.go), a whole document included;
// otherwise one range delete: from the time of the newest version
// dropped, or over the whole document's entries.
func (c *Collection[T]) unindex(tx *link.Tx, d *docState, prefix []byte, cut int64) error {
	keep, err := c.indexing(tx)
	if err != nil || !keep {
		return err
	}
	ip := indexDocPrefix(nil, prefix)
	oldest, err := d.oldestOf(c.store, prefix)
	if err != nil || oldest == 0 || cut < oldest {
		return err
	}
	whole := cut >= d.latest
	if n := cut - oldest + 1; n >= int64(knobs.Versioned.DropRangeMin) || c.shared {
		if whole {
			d.itimes = nil // numbers start again at 1
			return deleteRange(tx, ip, codec.PrefixEnd(ip))
		}
		t, err := c.timeOfVersion(d, prefix, cut)
		if err != nil || t == 0 {
			return err
		}
		return deleteRange(tx, numberKey(ip, t), codec.PrefixEnd(ip))
	}
	key := numberKey(ip, 0)
	del := func(t int64) error {
		codec.AppendDesc(key[:len(ip)], t)
		return deletePoint(tx, key)
	}
	// The Tx's own versions first, then those stored, newest first.
	top := cut
	for ; top >= oldest && d.itimes != nil && top > d.ibase && top <= d.ibase+int64(len(d.itimes)); top-- {
		if err := del(d.itimes[top-d.ibase-1]); err != nil {
			return err
		}
	}
	if whole {
		d.itimes = nil
	}
	if top < oldest {
		return nil
	}
	lo := numberKey(prefix, top)
	it, err := newIter(c.store, lo, numberKey(prefix, oldest-1), int(top-oldest+1))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.SeekGE(lo); ok; ok = it.Next() {
		raw, err := it.Value()
		if err != nil {
			return err
		}
		t := c.fm.Parse(raw).Time
		if t == 0 {
			break // no older version has a time either
		}
		if err := del(t); err != nil {
			return err
		}
	}
	return it.Error()
}

// indexedAt returns the version of the document under prefix latest at t
// (Unix ns) by the time index, with a copy of its value: ok false when
// the collection's index is not on or does not answer (the caller
// searches). See the file's doc for why its answer is always right.
//
// On an exclusive engine it reads with one iterator over both families,
// [01 | collection | id, 0D | collection | id + 1): the seek of the entry,
// the seek of the version after the one it names, a step to that version
// (opening an iterator costs as much as a seek there). On a shared engine,
// where an iterator's range is what a request may walk, with two.
func (c *Collection[T]) indexedAt(r engine.Reader, prefix []byte, t int64) (v int64, raw []byte, ok bool, err error) {
	if TimeIndexState(c.ti.state.Load()) != TimeIndexOn || t < 1 {
		return 0, nil, false, nil
	}
	buf := keyBufs.Get().(*[]byte)
	defer putKeyBuf(buf)
	// b: index prefix | desc(t), then the iterators' bounds.
	b := indexDocPrefix((*buf)[:0], prefix)
	n := len(b)
	b = codec.AppendDesc(b, t)
	at := b[: n+codec.NumberSize : n+codec.NumberSize]
	wide := !c.shared
	var it engine.Iter
	if wide {
		b = append(b, prefix...)
		lo := b[n+codec.NumberSize:]
		b = codec.AppendDesc(append(b, b[:n]...), math.MinInt64) // past every entry
		it, err = newIter(r, lo[:len(lo):len(lo)], b[len(b)-n-codec.NumberSize:], 2)
	} else {
		b = codec.AppendDesc(append(b, b[:n]...), 0)
		it, err = newIter(r, at, b[len(b)-n-codec.NumberSize:], 1)
	}
	*buf = b
	if err != nil {
		return 0, nil, false, err
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			ok, err = false, cerr
		}
	}()
	// under reports whether the iterator is at a numbered key of p.
	under := func(p []byte) bool {
		k := it.Key()
		return len(k) == len(p)+codec.NumberSize && bytes.HasPrefix(k, p)
	}
	var found bool
	if wide {
		found = it.SeekGE(at) && under(at[:n])
	} else {
		found = it.SeekPrefixGE(at)
	}
	if !found {
		return 0, nil, false, it.Error()
	}
	te, err := numberOf(it.Key(), n)
	if err != nil {
		return 0, nil, false, err
	}
	val, err := it.Value()
	if err != nil {
		return 0, nil, false, err
	}
	if len(val) != codec.NumberSize {
		return 0, nil, false, fmt.Errorf("%w: time index entry %x holds %d bytes", tipkv.ErrCorrupt, it.Key(), len(val))
	}
	if v, _, err = codec.DecodeAsc(val); err != nil || v < 1 {
		return 0, nil, false, err
	}
	// The versions v+1 (if any) and v: one seek and one step.
	next := numberKey(prefix, v+1)
	if wide {
		found = it.SeekGE(next) && under(prefix)
	} else {
		if err := it.Close(); err != nil {
			return 0, nil, false, err
		}
		if it, err = newIter(r, next, numberKey(prefix, 0), 2); err != nil {
			return 0, nil, false, err
		}
		found = it.SeekPrefixGE(next)
	}
	if !found {
		return 0, nil, false, it.Error()
	}
	got, err := numberOf(it.Key(), len(prefix))
	if err != nil {
		return 0, nil, false, err
	}
	if got == v+1 {
		after, err := it.Value()
		if err != nil {
			return 0, nil, false, err
		}
		if at := c.fm.Parse(after).Time; at == 0 || at <= t {
			return 0, nil, false, nil // a version after v is at or before t: stale
		}
		if !it.Next() || !under(prefix) {
			return 0, nil, false, it.Error()
		}
		if got, err = numberOf(it.Key(), len(prefix)); err != nil {
			return 0, nil, false, err
		}
	}
	if got != v {
		return 0, nil, false, nil
	}
	if val, err = it.Value(); err != nil {
		return 0, nil, false, err
	}
	if c.fm.Parse(val).Time != te {
		return 0, nil, false, nil // another version under that number (a purge)
	}
	return v, bytes.Clone(val), true, nil
}

// TimeIndex returns the state of the collection's time index as stored.
func (c *Collection[T]) TimeIndex() (TimeIndexState, error) {
	st, err := readIndexState(c.store, c.ti.key)
	if err != nil {
		return 0, fmt.Errorf("collection %q: time index state: %w", c.name, err)
	}
	return st, nil
}

// backfillBatch is the most versions one batch of EnableTimeIndex indexes.
const backfillBatch = 512

// EnableTimeIndex gives the collection a time index (see the package doc,
// "Reads by time"), durably: every handle of the collection, in this
// process and, on a shared engine, in others, keeps it from then on, and
// its reads by time use it. It writes the state "building", fills the
// index for every version already stored (one document at a time, in
// batches of at most 512 versions, each holding the document as a write
// does, so writes go on meanwhile), and writes "on". Reads by time use
// the index only once it is on; their answers are the same with or
// without it.
//
// It returns once the index is on, or with ctx's error or another one,
// leaving the state "building" (writes keep the index, reads do not use
// it): calling it again resumes. It returns at once when the index is on.
// On a shared engine it waits two poll intervals after writing
// "building" (see timeindex.go). It must not be called
// inside a DB.Update's function that writes the collection: it waits for
// that Update to end.
//
// The index costs, per version, one key of about the version key's size
// plus 8 bytes, written in the same batch; a drop of versions deletes
// their entries in the same batch too (a Prune, KeepVersions or the
// purge of expired documents reads the times of what it drops).
func (c *Collection[T]) EnableTimeIndex(ctx context.Context) error {
	ti := c.ti
	ti.mu.Lock()
	defer ti.mu.Unlock()
	where := fmt.Sprintf("collection %q: enable time index", c.name)
	st, err := readIndexState(c.store, ti.key)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if st == TimeIndexOn {
		ti.state.Store(int32(st))
		return nil
	}
	if err := c.setIndexState(TimeIndexBuilding, st); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if c.shared {
		wait := 2 * c.pollInterval()
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", where, ctx.Err())
		}
	}
	var ids []string
	err = walkPrefixes(c.store, c.prefix, codec.PrefixEnd(c.prefix), retainPage, func(it engine.Iter) error {
		k := it.Key()
		id, _, err := decodeDocTail(k[len(c.prefix):])
		if err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		ids = append(ids, id)
		return nil
	}, func() error {
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return err
			}
			if c.w.isClosed() {
				return tipkv.ErrClosed
			}
			if err := c.backfill(id); err != nil {
				return err
			}
		}
		ids = ids[:0]
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := c.setIndexState(TimeIndexOn, TimeIndexBuilding); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// DisableTimeIndex removes the collection's time index: its state and
// every entry, in one batch. Reads by time search again; their answers
// are the same. Like EnableTimeIndex it must not be called inside a
// DB.Update's function that writes the collection.
func (c *Collection[T]) DisableTimeIndex() error {
	c.ti.mu.Lock()
	defer c.ti.mu.Unlock()
	st, err := readIndexState(c.store, c.ti.key)
	if err == nil {
		err = c.setIndexState(TimeIndexOff, st)
	}
	if err != nil {
		return fmt.Errorf("collection %q: disable time index: %w", c.name, err)
	}
	return nil
}

// setIndexState moves the stored state from was to st, in this process
// first: writes decide under the new state before it is stored, and the
// Txs that may have decided under the old one end first (drain). On a
// shared engine the write requires the state read.
func (c *Collection[T]) setIndexState(st, was TimeIndexState) error {
	ti := c.ti
	ti.state.Store(int32(st))
	if err := c.w.drain(c.prefix); err != nil {
		return err
	}
	b := c.store.NewBatch()
	defer b.Close()
	if c.shared {
		cond := engine.Absent(ti.key)
		if was != TimeIndexOff {
			cond = engine.Equals(ti.key, []byte{byte(was)})
		}
		if err := b.Require(cond); err != nil {
			return err
		}
	}
	var err error
	if st == TimeIndexOff {
		p := indexPrefixOf(c.name)
		err = b.DeleteRange(p, codec.PrefixEnd(p))
	} else {
		err = b.Set(ti.key, []byte{byte(st)})
	}
	if err == nil {
		err = b.Apply(!c.w.ln.NoSync)
	}
	if err == nil {
		err = b.Wait()
	}
	if errors.Is(err, engine.ErrConditionFailed) {
		err = fmt.Errorf("%w: the time index state changed in another process meanwhile: %w", tipkv.ErrConflict, err)
	}
	if err != nil {
		ti.readAt.Store(0)
		_ = ti.refresh(c.store)
		return err
	}
	ti.readAt.Store(time.Now().UnixNano())
	return nil
}

// backfill writes the index entries of the versions of the document id,
// newest first, in batches of at most backfillBatch versions, each in a Tx
// that holds the document.
func (c *Collection[T]) backfill(id string) error {
	prefix := c.docPrefix(nil, id)
	ip := indexDocPrefix(nil, prefix)
	below := int64(0) // 0: from the latest
	for {
		var done bool
		err := link.Write(c.db, func(tx *link.Tx) error {
			if _, err := c.lock(tx, prefix, id); err != nil {
				return err
			}
			lo := prefix
			if below > 0 {
				lo = numberKey(prefix, below-1)
			}
			it, err := newIter(c.store, lo, numberKey(prefix, 0), backfillBatch+1)
			if err != nil {
				return err
			}
			defer it.Close()
			n, ok := 0, it.SeekPrefixGE(lo)
			var v int64
			var last, lastRaw []byte
			for ; ok && n < backfillBatch; ok = it.Next() {
				if v, err = numberOf(it.Key(), len(prefix)); err != nil {
					return err
				}
				raw, err := it.Value()
				if err != nil {
					return err
				}
				t := c.fm.Parse(raw).Time
				if t == 0 {
					ok = false // no older version has a time
					break
				}
				if err := tx.Batch.Set(numberKey(ip, t), codec.AppendAsc(nil, v)); err != nil {
					return err
				}
				last, lastRaw = append(last[:0], it.Key()...), append(lastRaw[:0], raw...)
				n++
			}
			if err := it.Error(); err != nil {
				return err
			}
			if c.shared && last != nil {
				// Versions are dense and dropped oldest first: if the
				// oldest version indexed here is still stored as read,
				// so is every one above it.
				if err := tx.Batch.Require(engine.Equals(last, lastRaw)); err != nil {
					return err
				}
			}
			done, below = !ok || v <= 1, v
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", c.where(id), err)
		}
		if done {
			return nil
		}
	}
}

// drain waits until every Tx of this process that held a document under
// prefix when it was called has ended (applied or aborted). A Tx decides
// how to keep a collection's time index while it holds one of the
// collection's documents, so after drain no Tx acts on a state stored
// before it. On a shared engine it waits too: the commit condition covers
// other processes.
func (w *writer) drain(prefix []byte) error {
	type held struct {
		e *docEntry
		h *txWrites
	}
	w.mu.Lock()
	var hs []held
	for _, m := range []map[string]*docEntry{w.cache.cur, w.cache.old} {
		for k, e := range m {
			if e.holder != nil && len(k) >= len(prefix) && k[:len(prefix)] == string(prefix) {
				hs = append(hs, held{e, e.holder})
			}
		}
	}
	for _, x := range hs {
		for x.e.holder == x.h {
			if w.closed {
				w.mu.Unlock()
				return tipkv.ErrClosed
			}
			if x.e.wake == nil {
				x.e.wake = make(chan struct{})
			}
			wake := x.e.wake
			x.e.waiters++
			w.mu.Unlock()
			if knobs.Versioned.OnWait != nil {
				knobs.Versioned.OnWait()
			}
			select {
			case <-wake:
			case <-w.closing:
			}
			w.mu.Lock()
			x.e.waiters--
		}
	}
	w.mu.Unlock()
	return nil
}
