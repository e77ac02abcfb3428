package versioned

import (
	"context"
	"fmt"
	"hash/maphash"
	"iter"
	"math"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/knobs"
)

// ChangeKind says what a Change reports.
type ChangeKind uint8

const (
	// ChangePut is a version written by Put or PutIf: Change.Doc.
	ChangePut ChangeKind = iota + 1
	// ChangeDelete is a delete marker written by Delete: Change.Doc, with
	// Deleted set and the zero Value. The document reads as not found.
	ChangeDelete
	// ChangePrune says that the versions below Change.Oldest were dropped
	// (Prune, PruneBefore, or the collection's KeepVersions). Versions
	// the watcher had not delivered yet may be among them: it goes on
	// from Oldest.
	ChangePrune
	// ChangePurge says that the whole history was dropped (Purge):
	// versions start again at 1, and the watcher goes on from 0.
	ChangePurge
)

func (k ChangeKind) String() string {
	switch k {
	case ChangePut:
		return "put"
	case ChangeDelete:
		return "delete"
	case ChangePrune:
		return "prune"
	case ChangePurge:
		return "purge"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is one change of a watched document.
type Change[T any] struct {
	Kind ChangeKind
	// Doc is the version written, for ChangePut and ChangeDelete.
	Doc Doc[T]
	// Oldest is the oldest version kept, for ChangePrune.
	Oldest int64
}

// watchPage is the most versions a Watch reads at once, and watchBytes
// the most value bytes (at least one version is read).
const (
	watchPage  = 256
	watchBytes = 1 << 20
)

// Watch yields the changes of the document id after version after (0:
// from its first version), in version order, and then blocks for new ones:
// each version written (ChangePut, or ChangeDelete for a delete marker),
// each drop of old versions (ChangePrune, with the oldest version kept)
// and a Purge (ChangePurge). Each version is delivered once. A version
// pruned before the watcher read it is not delivered: the ChangePrune
// before the next versions says where they resume.
//
// Only durable versions are delivered: a version is yielded once the
// commit that wrote it has finished its durability wait (for a synced
// write, the WAL sync; for a NoSync write, at once: as durable as it was
// asked to be), so a consumer never acts on a version that a crash can
// still erase. A commit that fails its WAL sync is never delivered, and
// a Watch of its documents then delivers nothing more (Pebble refuses
// every write after that).
//
// It does not poll on an exclusive engine: it sleeps until a commit of
// the document becomes durable. On a shared engine it also sleeps on the
// engine's watch of the document's keys (Caps.Watch), or else reads the
// document again every Caps.PollInterval (a second if unset), so a version
// written by another process arrives within that interval. Each wake-up
// reads the document's newest and oldest versions and the new ones: one
// iterator, one view, whose range starts at the oldest version the last
// wake-up found, so that finding the oldest version costs the versions
// dropped since then, not all the dropped versions the engine still holds
// as tombstones.
//
// The iteration ends when the consumer stops, with ctx.Err() as the last
// pair when ctx ends, with an error matching tipkv.ErrClosed when the DB
// closes, or with the error of a read. Nothing is left running after it.
// An empty or oversized id, or after < 0, is ErrInvalid.
//
// A Purge is recognised when the watcher finds fewer versions than it
// delivered, an oldest version older than the one it knew, or another
// value at the last version it delivered; a Purge followed by the same
// values written again at the same versions before the watcher looked is
// no change to it. While a Watch of any document runs, each commit that
// writes documents takes the DB's version lock once more (when it becomes
// durable).
//
// Watch follows one document. A cache of a whole collection follows a
// feed that the writers append to in the same DB.Update as their Puts.
func (c *Collection[T]) Watch(ctx context.Context, id string, after int64) iter.Seq2[Change[T], error] {
	return func(yield func(Change[T], error) bool) {
		if err := c.watch(ctx, id, after, yield); err != nil {
			yield(Change[T]{}, err)
		}
	}
}

// watchState is what a Watch has delivered.
type watchState struct {
	next   int64 // the next version to deliver
	oldest int64 // the oldest version known to be kept; 0: not read yet
	hash   uint64
	hashed bool // hash is the hash of the value of version next-1
	seed   maphash.Seed
}

func (c *Collection[T]) watch(ctx context.Context, id string, after int64, yield func(Change[T], error) bool) error {
	if err := checkID(c.name, id); err != nil {
		return err
	}
	if after < 0 {
		return fmt.Errorf("%w: %s: Watch after version %d", tipkv.ErrInvalid, c.where(id), after)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	prefix := c.docPrefix(nil, id)
	hi := numberKey(prefix, 0)
	e, err := c.w.watch(ctx, prefix)
	if err != nil {
		return c.watchErr(ctx, id, err)
	}
	defer c.w.unwatch(e)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	caps := c.store.Caps()
	var watcher engine.Watcher
	var tick <-chan time.Time
	if caps.Shared {
		if w, ok := c.store.(engine.Watcher); ok && caps.Watch {
			watcher = w
		} else {
			poll := caps.PollInterval
			if poll <= 0 {
				poll = time.Second
			}
			t := time.NewTicker(poll)
			defer t.Stop()
			tick = t.C
		}
	}
	st := watchState{next: after + 1, seed: maphash.MakeSeed()}
	var storeCh <-chan struct{}
	for {
		// Arm every wake-up before reading: no change after the read is
		// missed.
		if watcher != nil && storeCh == nil {
			if storeCh, err = watcher.Watch(wctx, prefix, hi); err != nil {
				return c.watchErr(ctx, id, err)
			}
		}
		local, err := c.w.changedCh(e)
		if err != nil {
			return c.watchErr(ctx, id, err)
		}
		changes, more, err := c.watchRead(id, prefix, hi, e, &st)
		if err != nil {
			return c.watchErr(ctx, id, err)
		}
		for _, ch := range changes {
			if !yield(ch, nil) {
				return nil
			}
		}
		if more {
			continue
		}
		if knobs.Versioned.OnWatchSleep != nil {
			knobs.Versioned.OnWatchSleep()
		}
		select {
		case <-local:
		case _, ok := <-storeCh:
			if !ok {
				storeCh = nil // the watch broke (or ctx ended): watch again
			}
		case <-tick:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.w.closing:
			return fmt.Errorf("watch of %s: %w", c.where(id), tipkv.ErrClosed)
		}
	}
}

// watchErr wraps an error of Watch, or returns ctx's error if ctx ended
// meanwhile (a watch fails when its context ends).
func (c *Collection[T]) watchErr(ctx context.Context, id string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("watch of %s: %w", c.where(id), err)
}

// watchRead reads the document once and returns the changes to deliver
// after st, moving st past them; more says that more versions are ready
// to be read at once. It reads from a floor (see watchFloor) and reads
// again over the whole range, from a new view, when the floor's range
// cannot tell the oldest version.
func (c *Collection[T]) watchRead(id string, prefix, hi []byte, e *docEntry, st *watchState) (changes []Change[T], more bool, err error) {
	f, err := c.watchFloor(prefix, st)
	if err != nil {
		return nil, false, err
	}
	for {
		changes, more, whole, err := c.watchReadFrom(id, prefix, hi, e, st, f)
		if !whole {
			return changes, more, err
		}
		f = 0
	}
}

// watchFloor returns the floor a wake-up of a Watch in state st reads the
// document under prefix from (0: none, the whole range). Finding the
// oldest version with Last walks back from the end of the iterator's
// range over every dropped version still in the engine as a tombstone (a
// memtable of Pebble's holds one for each version KeepVersions dropped
// since its last flush): 97% of a watcher's time with KeepVersions 64 in
// issue 30's profile. The floor is the oldest version the watcher saw
// last, or before it saw one, on an exclusive engine, the KeepVersions-th
// newest version (one more seek; on a shared engine a round trip, which a
// watcher of a document with no version would pay at every poll). Any
// floor f gives the same changes as
// the whole range: watchReadFrom reads the versions [f-1, MaxInt64] of
// one view, and versions are dense from the oldest to the latest, so
//
//	version f-1 not in it   Last finds the oldest version (at or above f),
//	                        having stepped over the versions dropped in
//	                        [f-1, oldest) only
//	version f-1 in it       the oldest may be below (a Purge and new
//	(or no version at all)  versions, a handle with another KeepVersions):
//	                        read again over the whole range
func (c *Collection[T]) watchFloor(prefix []byte, st *watchState) (int64, error) {
	switch {
	case knobs.Versioned.WatchWholeRange:
		return 0, nil
	case st.oldest > 0:
		return st.oldest, nil
	case c.keep > 0 && !c.shared:
		nv, err := newestVersion(c.store, prefix, false)
		if err != nil {
			return 0, err
		}
		return nv.v - c.keep + 1, nil
	}
	return 0, nil
}

// watchReadFrom is watchRead from floor f (see watchFloor); whole says
// that the versions from f cannot tell the oldest version: read again with
// no floor. Nothing is changed in st then.
func (c *Collection[T]) watchReadFrom(id string, prefix, hi []byte, e *docEntry, st *watchState, f int64) (changes []Change[T], more, whole bool, err error) {
	end := hi
	if f > 1 {
		end = numberKey(prefix, f-2) // versions [f-1, MaxInt64]
	}
	it, err := newIter(c.store, prefix, end, 2)
	if err != nil {
		return nil, false, false, err
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			changes, more, whole, err = nil, false, false, cerr
		}
	}()
	found := it.First()
	if !found && f > 1 && it.Error() == nil {
		return nil, false, true, nil
	}
	var latest, oldest int64
	var latestHash uint64
	// The view is taken: what this process has made visible in it and not
	// yet durable is known now (see writer).
	bound, ok := c.w.watchBound(e)
	if !ok {
		return nil, false, false, nil // a Purge in flight, or nothing known of a write in flight
	}
	bounded := bound < math.MaxInt64
	if found {
		if latest, err = numberOf(it.Key(), len(prefix)); err != nil {
			return nil, false, false, err
		}
		raw, err := it.Value()
		if err != nil {
			return nil, false, false, err
		}
		latestHash = maphash.Bytes(st.seed, raw)
		if !it.Last() {
			if err := it.Error(); err != nil {
				return nil, false, false, err
			}
			return nil, false, false, fmt.Errorf("%w: no oldest version under the latest %d", tipkv.ErrCorrupt, latest)
		}
		if oldest, err = numberOf(it.Key(), len(prefix)); err != nil {
			return nil, false, false, err
		}
		if f > 1 && oldest < f {
			return nil, false, true, nil // version f-1: the oldest may be below
		}
	} else if err := it.Error(); err != nil {
		return nil, false, false, err
	}

	// A Purge: fewer versions than delivered, an older oldest, or another
	// value at the last version delivered. No Purge is in flight (ok), so
	// what shows one is durable.
	purged := latest < st.next-1 || (st.oldest > 0 && oldest < st.oldest)
	if !purged && st.hashed && st.next-1 >= max(oldest, 1) {
		h := latestHash
		if latest > st.next-1 {
			if !it.SeekGE(numberKey(prefix, st.next-1)) {
				return nil, false, false, it.Error()
			}
			v, err := numberOf(it.Key(), len(prefix))
			if err != nil {
				return nil, false, false, err
			}
			raw, err := it.Value()
			if err != nil {
				return nil, false, false, err
			}
			h = maphash.Bytes(st.seed, raw)
			if v != st.next-1 {
				h = ^st.hash
			}
		}
		purged = h != st.hash
	}
	if purged {
		changes = append(changes, Change[T]{Kind: ChangePurge})
		st.next, st.oldest, st.hashed = 1, 0, false
	}
	if latest == 0 {
		return changes, false, false, nil
	}
	if oldest > st.next || (st.oldest > 0 && oldest > st.oldest) {
		if bounded {
			// A drop may be in flight: wait until it is durable.
			if oldest > st.next {
				return changes, false, false, nil
			}
		} else {
			changes = append(changes, Change[T]{Kind: ChangePrune, Oldest: oldest})
			st.oldest = oldest
			st.next = max(st.next, oldest)
		}
	}
	if st.oldest == 0 && !bounded {
		st.oldest = oldest
	}
	top := min(latest, st.next+watchPage-1, bound)
	if top < st.next {
		return changes, false, false, nil
	}
	if !it.SeekGE(numberKey(prefix, top)) {
		if err := it.Error(); err != nil {
			return nil, false, false, err
		}
		return nil, false, false, fmt.Errorf("%w: version %d missing between %d and %d", tipkv.ErrCorrupt, top, oldest, latest)
	}
	type version struct {
		v   int64
		raw []byte
	}
	var vs []version
	size := 0
	for want := top; it.Valid() && want >= st.next; want-- {
		v, err := numberOf(it.Key(), len(prefix))
		if err != nil {
			return nil, false, false, err
		}
		if v != want {
			return nil, false, false, fmt.Errorf("%w: version %d missing between %d and %d", tipkv.ErrCorrupt, want, oldest, latest)
		}
		raw, err := it.Value()
		if err != nil {
			return nil, false, false, fmt.Errorf("version %d: %w", v, err)
		}
		vs = append(vs, version{v, append([]byte(nil), raw...)})
		if size += len(raw); size >= watchBytes && want > st.next {
			// Too much to hold: keep the oldest of what was read.
			vs = vs[:0]
			size = 0
			top = want - 1
			more = true
		}
		it.Next()
	}
	if err := it.Error(); err != nil {
		return nil, false, false, err
	}
	if len(vs) == 0 || vs[len(vs)-1].v != st.next {
		return nil, false, false, fmt.Errorf("%w: versions %d to %d missing", tipkv.ErrCorrupt, st.next, top)
	}
	more = more || top < min(latest, bound)
	scratch := new(T)
	for i := len(vs) - 1; i >= 0; i-- {
		d, err := c.doc(id, vs[i].v, vs[i].raw, kindHistory, scratch)
		if err != nil {
			return nil, false, false, err
		}
		kind := ChangePut
		if c.fm.IsDeleteMarker(vs[i].raw) {
			kind = ChangeDelete
		}
		changes = append(changes, Change[T]{Kind: kind, Doc: d})
		st.next, st.hash, st.hashed = vs[i].v+1, maphash.Bytes(st.seed, vs[i].raw), true
	}
	return changes, more, false, nil
}

// watch registers a Watch of the document under prefix and returns its
// entry, once every commit applied before it is durable.
func (w *writer) watch(ctx context.Context, prefix []byte) (*docEntry, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, tipkv.ErrClosed
	}
	e := w.cache.entry(prefix)
	e.watchers++
	w.watching++
	w.mu.Unlock()
	w.drainWaiters.Add(1)
	defer w.drainWaiters.Add(-1)
	for {
		w.mu.Lock()
		if w.unrecorded.Load() == 0 {
			w.mu.Unlock()
			return e, nil
		}
		if w.drained == nil {
			w.drained = make(chan struct{})
		}
		ch := w.drained
		w.mu.Unlock()
		if knobs.Versioned.OnWatchSleep != nil {
			knobs.Versioned.OnWatchSleep()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			w.unwatch(e)
			return nil, ctx.Err()
		case <-w.closing:
			w.unwatch(e)
			return nil, tipkv.ErrClosed
		}
	}
}

// unwatch ends a Watch of e.
func (w *writer) unwatch(e *docEntry) {
	w.mu.Lock()
	e.watchers--
	w.watching--
	w.mu.Unlock()
}

// changedCh returns the channel closed when the next change of e becomes
// durable.
func (w *writer) changedCh(e *docEntry) (<-chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, tipkv.ErrClosed
	}
	if e.changed == nil {
		e.changed = make(chan struct{})
	}
	return e.changed, nil
}

// watchBound returns the greatest version of e that a Watch may deliver
// from a view of the store taken before the call: versions up to it are
// durable, or written by another process. MaxInt64: every version; ok
// false: none for now (a Purge is in flight, or a Tx holding e may have
// written versions whose predecessor is unknown).
func (w *writer) watchBound(e *docEntry) (bound int64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	bound = math.MaxInt64
	if e.holder != nil {
		if !e.baseKnown || e.dropping {
			return 0, false
		}
		bound = e.base
	}
	for _, f := range e.pend {
		if f == 0 {
			return 0, false
		}
		bound = min(bound, f)
	}
	return bound, true
}
