package versioned

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
)

// positions hands out the positions of a DB's feed streams. There is one
// per DB, shared by every Feed handle. It keeps the state of recently used
// streams, at most about knobs.Versioned.StreamEntries of them: as the writer's cache
// does, two generations, the older dropped when the newer fills, except
// the streams that are busy (an Append in flight, a trim, a follower, or
// a caller between pin and unpin: forgetting those could hand a position
// out twice). A dropped stream is loaded again with one seek.
type positions struct {
	mu       sync.Mutex
	cur, old map[string]*stream // by key prefix
	half     int
}

type positionsKey struct{}

func positionsOf(db *tipkv.DB) (*positions, error) {
	ln, err := link.Of(db)
	if err != nil {
		return nil, err
	}
	return ln.Services.Get(positionsKey{}, func() any {
		half := max(knobs.Versioned.StreamEntries/2, 1)
		return &positions{cur: make(map[string]*stream, half), old: map[string]*stream{}, half: half}
	}).(*positions), nil
}

// pin returns the state of the stream under prefix, kept in memory until
// unpin.
func (p *positions) pin(prefix []byte) *stream {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.cur[string(prefix)]
	if !ok {
		if st, ok = p.old[string(prefix)]; ok {
			delete(p.old, string(prefix))
		} else {
			st = &stream{}
		}
		if len(p.cur) >= p.half {
			p.old, p.cur = p.cur, p.old
			for k, st := range p.cur {
				if !st.busy() {
					delete(p.cur, k)
				}
			}
		}
		p.cur[string(prefix)] = st
	}
	st.refs.Add(1)
	return st
}

func (p *positions) unpin(st *stream) { st.refs.Add(-1) }

// len returns how many streams are in memory.
func (p *positions) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.cur) + len(p.old)
}

// stream is what this process knows of one stream's positions (Unix
// nanoseconds, 1 to MaxInt64). They fall into these ranges:
//
//	[1, low)             no event, stored or in flight (low 0: unknown,
//	                     and the range empty); a trim starts from low, so
//	                     that it never steps over the tombstones of the
//	                     trims before
//	[low, last]          stored events and free gaps, and inflight: the
//	                     positions handed out whose Tx has neither
//	                     committed (applied and as durable as it asked)
//	                     nor aborted
//	[low, bound]         settled, bound = min(last, min(inflight)-1):
//	                     every position an Append of this process handed
//	                     out there committed or aborted, so a follower
//	                     may read up to bound (followBound)
//	(last, MaxInt64]     free: Append takes the clock's time, or last+1
//	                     when the clock is not past last; last is never
//	                     below the stream's trim mark (feed_mark.go),
//	                     so that a stream trimmed to empty does not
//	                     hand out its dropped positions again
//	[t, ties[t])         for a time t given to AppendAt at or below last:
//	                     taken when recorded, so the next AppendAt(t)
//	                     probes from ties[t]
//	[1, trimmed]         dropped by a trim this process applied since the
//	                     DB opened: the next trim's range delete starts
//	                     above it, so that no two overlap
//
// An AppendAt into the past reserves inside [low, last] (or below low,
// lowering it); a trim raises low when it is applied. While a trim is in
// flight, watchMin is the least position in flight when it began or
// reserved since: the trim's new low must not pass it. All fields but refs
// are guarded by mu.
type stream struct {
	mu       sync.Mutex
	loaded   bool               // last and mark have been read from the store
	last     int64              // top of [low, last]: the greatest position handed out, stored or trimmed (the mark)
	mark     int64              // the stored trim mark as last read or raised (0: none): a shared engine's Appends require it
	inflight map[int64]struct{} // in [low, last]: handed out, the Tx not finished
	ties     map[int64]int64    // t -> ties[t], for AppendAt (emptied at maxTies)
	low      int64              // bottom of [low, last], 0 when unknown
	trimmed  int64              // top of [1, trimmed]
	watching bool               // a trim of the stream is in flight (it holds the stream in the writer)
	watchMin int64              // while watching: the least position in flight since the trim began
	changed  chan struct{}      // made by a follower that waits; closed when a position leaves inflight
	refs     atomic.Int32       // callers between pin and unpin
}

// busy reports whether the stream's state must stay in memory.
func (st *stream) busy() bool {
	if st.refs.Load() > 0 {
		return true
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.inflight) > 0 || st.watching || st.changed != nil
}

// maxTies bounds stream.ties; the map is emptied when it is full.
const maxTies = 1024

// load reads the stream's last position and trim mark from the store
// when they are not known: one seek and one Get. st.mu is held.
func (st *stream) load(s engine.Reader, prefix []byte) error {
	if st.loaded {
		return nil
	}
	last, mark, err := lastStored(s, prefix)
	if err != nil {
		return err
	}
	// max: after an unload (a shared engine's failed commit), this
	// process's own Appends in flight may lie above what is stored.
	st.last, st.mark, st.loaded = max(st.last, last), mark, true
	return nil
}

// raise lifts the stream's last position and mark to m, a trim mark
// that a Tx of this process committed.
func (st *stream) raise(m int64) {
	st.mu.Lock()
	st.last, st.mark = max(st.last, m), max(st.mark, m)
	st.mu.Unlock()
}

// reserve hands out a unique position: with at == 0, the clock's time
// bumped past the last position; otherwise at, or the first nanosecond
// after it that no stored or in-flight event holds. It returns the last
// position before too, and the trim mark that last accounts for. A clock
// reading out of [MinTime, MaxTime] is ErrInvalid.
func (st *stream) reserve(s engine.Reader, prefix []byte, at int64, clock func() time.Time) (p, before, mark int64, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.load(s, prefix); err != nil {
		return 0, 0, 0, err
	}
	before, mark = st.last, st.mark
	p = at
	if at == 0 {
		now := clock()
		if err := checkTime("the clock reads", now); err != nil {
			return 0, 0, 0, err
		}
		p = now.UnixNano()
		if st.last < math.MaxInt64 {
			p = max(p, st.last+1)
		} else {
			// An event at the last nanosecond (older versions' AppendAt
			// wrote one at the maximum time) leaves nothing after it:
			// place the event as AppendAt would, at the clock's time.
			at = p
		}
	}
	if h, ok := st.ties[at]; ok && at != 0 {
		p = max(p, h)
	}
	for ; p <= st.last; p++ {
		if _, busy := st.inflight[p]; !busy {
			_, err := s.Get(numberKey(prefix, p))
			if errors.Is(err, engine.ErrNotFound) {
				break
			}
			if err != nil {
				return 0, 0, 0, err
			}
		}
		if p == math.MaxInt64 {
			return 0, 0, 0, fmt.Errorf("%w: every position from %d on is taken", tipkv.ErrInvalid, at)
		}
	}
	if at != 0 && p <= st.last {
		if st.ties == nil {
			st.ties = map[int64]int64{}
		}
		if len(st.ties) >= maxTies {
			clear(st.ties)
		}
		st.ties[at] = p + 1
	}
	st.last = max(st.last, p)
	if st.inflight == nil {
		st.inflight = map[int64]struct{}{}
	}
	st.inflight[p] = struct{}{}
	if st.low > 0 {
		st.low = min(st.low, p)
	}
	if st.watching {
		st.watchMin = min(st.watchMin, p)
	}
	return p, before, mark, nil
}

// unload marks the stream's last position and ties, hints on a shared
// engine, as proved stale by a failed commit: the next reserve reads the
// store's newest position (keeping the greater of the two) and forgets
// the ties.
func (st *stream) unload() {
	st.mu.Lock()
	st.loaded = false
	clear(st.ties)
	st.mu.Unlock()
}

// trimBegin starts watching the reservations for a trim and returns the
// stream's low bound (0: unknown) and how far the trims before dropped.
func (st *stream) trimBegin() (low, trimmed int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.watching, st.watchMin = true, math.MaxInt64
	for p := range st.inflight {
		st.watchMin = min(st.watchMin, p)
	}
	return st.low, st.trimmed
}

// trimApplied ends a trim whose Tx is applied: no stored event is below
// low (0: unknown) any more, unless it was in flight meanwhile, and every
// position <= cut was dropped.
func (st *stream) trimApplied(low, cut int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if low > 0 {
		st.low = min(low, st.watchMin)
	}
	st.trimmed = max(st.trimmed, cut)
	st.watching = false
}

// trimAborted ends a trim whose Tx failed.
func (st *stream) trimAborted() {
	st.mu.Lock()
	st.watching = false
	st.mu.Unlock()
}

// releaseDone ends a release of positions begun by locking st.mu: it
// wakes the stream's followers and unlocks.
func (st *stream) releaseDone() {
	if st.changed != nil {
		close(st.changed)
		st.changed = nil
	}
	st.mu.Unlock()
}

// changedCh returns a channel closed when a position of this process
// leaves inflight: an Append of the stream committed or aborted.
func (st *stream) changedCh() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.changed == nil {
		st.changed = make(chan struct{})
	}
	return st.changed
}

// followBound returns the greatest position a follower may read up to on
// an exclusive engine: every position at or below it that an Append of
// this process handed out has committed (durably, as its Update asked) or
// aborted, so that no event can appear there later (AppendAt into the
// past aside). It reads the stream's newest position from the store when
// the stream is not loaded. changed is closed when the bound may have
// moved, made when wait is set.
func (st *stream) followBound(s engine.Reader, prefix []byte, wait bool) (bound int64, changed <-chan struct{}, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.load(s, prefix); err != nil {
		return 0, nil, err
	}
	bound = st.last
	for p := range st.inflight {
		bound = min(bound, p-1)
	}
	if !wait {
		return bound, nil, nil
	}
	if st.changed == nil {
		st.changed = make(chan struct{})
	}
	return bound, st.changed, nil
}

// feedTx holds the positions a Tx reserved, released when it commits
// (applied and as durable as it asked: the events are then in the store
// for reserve to see, and followers may read them) or aborted (the
// positions are then free again, unless the clock has moved past them).
// A Tx whose durability wait fails releases nothing: followers stop below
// its events until a restart settles what survived.
type feedTx struct {
	res []reservation
	// guarded lists the streams whose head the Tx guards (shared engines).
	guarded []*stream
	// The stream of the Tx's last Append, kept in memory by its
	// reservation: a run of Appends to one stream looks it up once.
	lastName   string
	lastPrefix []byte
	lastSt     *stream
	// committing: on a shared engine, the Tx went to commit; if it then
	// aborts, its streams' hints are dropped.
	committing bool
	appends    *atomic.Uint64 // the DB's count of appends (dbMeters)
}

type reservation struct {
	st      *stream
	p       int64
	dropped bool // a trim of the same Tx deleted it
}

type feedTxKey struct{}

// committed counts the Tx's Appends and releases their positions.
func (t *feedTx) committed() {
	t.appends.Add(uint64(len(t.res)))
	t.release()
}

func (t *feedTx) release() {
	// A run of one stream's positions is released under one lock.
	var st *stream
	for _, r := range t.res {
		if r.st != st {
			if st != nil {
				st.releaseDone()
			}
			st = r.st
			st.mu.Lock()
		}
		delete(st.inflight, r.p)
	}
	if st != nil {
		st.releaseDone()
	}
}

// aborted releases the Tx's positions and, on a shared engine after a
// failed commit, unloads their streams: another process may hold them.
func (t *feedTx) aborted() {
	t.release()
	if t.committing {
		for _, r := range t.res {
			r.st.unload()
		}
	}
}

// feedTxOf returns the Tx's reservations, creating them at the first call.
func feedTxOf(tx *link.Tx, w *writer, shared bool) *feedTx {
	return tx.State(feedTxKey{}, func() any {
		t := &feedTx{appends: &w.dbm.appends}
		tx.OnCommit(t.committed)
		if shared {
			tx.OnPrepare(func() error { t.committing = true; return nil })
			tx.OnAbort(t.aborted)
		} else {
			tx.OnAbort(t.release)
		}
		return t
	}).(*feedTx)
}

// own returns the positions the Tx reserved in st and has not dropped,
// newest first.
func (t *feedTx) own(st *stream) []int64 {
	var out []int64
	for _, r := range t.res {
		if r.st == st && !r.dropped {
			out = append(out, r.p)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// drop marks the Tx's reservations in st at or below cut as deleted.
func (t *feedTx) drop(st *stream, cut int64) {
	for i := range t.res {
		if r := &t.res[i]; r.st == st && r.p <= cut {
			r.dropped = true
		}
	}
}

// guardHead requires, once per Tx and stream on a shared engine, that the
// store holds no event of the stream above before, the last position this
// process knew of when the Tx first appended to it, and that the stream's
// trim mark is still mark, the one before accounts for. Every position
// Append hands out is above it, so a commit that passes the guard comes
// after every event below its own: commit order is position order, across
// processes, and a follower that has read up to a position never meets an
// event below it later (AppendAt into the past aside). If another process
// appended above, or trimmed events this process never saw (raising the
// mark), the commit fails, the stream is read again (see
// feedTx.aborted) and the Update runs again. Both conditions lie under
// the stream's prefix: an engine that guards a range by its prefix takes
// one lock for them.
func (t *feedTx) guardHead(b engine.Batch, st *stream, prefix []byte, before, mark int64) error {
	if slices.Contains(t.guarded, st) || before == math.MaxInt64 {
		return nil
	}
	t.guarded = append(t.guarded, st)
	if err := b.Require(engine.Empty(numberKey(prefix, math.MaxInt64), numberKey(prefix, before))); err != nil {
		return err
	}
	return b.Require(markCond(prefix, mark))
}
