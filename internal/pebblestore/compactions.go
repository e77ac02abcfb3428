package pebblestore

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/tipkv/tipkv/codec"
)

// compactions is the store's compaction scheduler (Pebble's
// Options.Experimental.CompactionScheduler). It grants compactions by the
// rule of Pebble's default scheduler (ConcurrencyLimitScheduler): as many
// at once as the DB allows without permission, checked when Pebble asks,
// when a compaction ends, when Pebble says the allowance may have grown,
// and every 100 ms. And it can stop: once stopped it grants none again
// while the store is open.
//
// The store stops it when a compaction fails on a corrupt table (see
// faults). Pebble picks a failed compaction again at once and retries it
// for ever: it marks the inputs as problem spans, which the picker avoids
// for five minutes after a corruption, but never on L0, so a corrupt table
// in L0 (or one a compaction out of L0 must rewrite) made Pebble read,
// write and sync the other inputs in a loop, tens of thousands of jobs a
// minute, and a manual Compact waited behind it for ever. Pebble has no
// way to leave one table out of compactions, so the store leaves them all
// out: a corrupt table cannot be compacted anyway, and every compaction
// that overlaps it would fail the same way.
//
// What is not scheduled here goes on: flushes, delete-only compactions
// (which drop whole tables without reading them) and downloads.
type compactions struct {
	db pebble.DBForCompaction // set by Register, before any other call

	mu       sync.Mutex
	cond     sync.Cond // on mu: granting became false
	running  int       // compactions granted and not done
	granting bool      // a goroutine is granting waiting compactions
	closed   bool      // unregistered
	err      error     // why it stopped; nil while it runs

	stopped chan struct{} // closed when it stops
	poke    chan struct{} // grant now
	quit    chan struct{} // closed by Unregister (or abandon)
	quitted sync.Once
	started bool          // Register started the granter
	done    chan struct{} // closed when the granter has returned
}

var (
	_ pebble.CompactionScheduler   = (*compactions)(nil)
	_ pebble.CompactionGrantHandle = (*compactions)(nil)
)

// grantEvery is how often the granter looks for compactions to grant
// without being told to (Pebble's default scheduler's period).
const grantEvery = 100 * time.Millisecond

func (c *compactions) init() {
	c.cond.L = &c.mu
	c.stopped = make(chan struct{})
	c.poke = make(chan struct{}, 1)
	c.quit = make(chan struct{})
	c.done = make(chan struct{})
}

// stop grants no compaction from now on, for err. It reports whether this
// call stopped it (false if it was already stopped).
func (c *compactions) stop(err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return false
	}
	c.err = err
	close(c.stopped)
	return true
}

// stoppedBy returns why compactions stopped, nil while they run.
func (c *compactions) stoppedBy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Register implements pebble.CompactionScheduler.
func (c *compactions) Register(_ int, db pebble.DBForCompaction) {
	c.db = db
	c.started = true
	go c.granter()
}

// Unregister implements pebble.CompactionScheduler: no call into the DB
// starts after it returns.
func (c *compactions) Unregister() {
	c.abandon()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for c.granting {
		c.cond.Wait()
	}
}

// TrySchedule implements pebble.CompactionScheduler. Pebble calls it
// holding its mutex; GetAllowedWithoutPermission takes none of Pebble's.
func (c *compactions) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.err != nil {
		return false, nil
	}
	if c.db.GetAllowedWithoutPermission() > c.running {
		c.running++
		return true, c
	}
	return false, nil
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler.
func (c *compactions) UpdateGetAllowedWithoutPermission() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// Started, MeasureCPU and CumulativeStats implement
// pebble.CompactionGrantHandle: nothing is measured.
func (c *compactions) Started()                                          {}
func (c *compactions) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (c *compactions) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done implements pebble.CompactionGrantHandle: a granted compaction
// ended. Pebble calls it holding none of its locks.
func (c *compactions) Done() {
	c.mu.Lock()
	c.running--
	c.mu.Unlock()
	c.grant()
}

// abandon ends the granter, if Register started one: Pebble registers
// before the last steps of its Open, and does not unregister if one fails.
func (c *compactions) abandon() {
	c.quitted.Do(func() { close(c.quit) })
	if c.started {
		<-c.done
	}
}

func (c *compactions) granter() {
	defer close(c.done)
	t := time.NewTicker(grantEvery)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		case <-c.poke:
		}
		c.grant()
	}
}

// grant starts waiting compactions while the allowance has room. One
// goroutine grants at a time; none holds c.mu while it calls into the DB
// (Pebble's locks come before the scheduler's).
func (c *compactions) grant() {
	c.mu.Lock()
	for c.granting {
		c.cond.Wait()
	}
	if c.closed || c.err != nil {
		c.mu.Unlock()
		return
	}
	room := c.db.GetAllowedWithoutPermission() - c.running
	if room <= 0 {
		c.mu.Unlock()
		return
	}
	c.granting = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.granting = false
		c.cond.Broadcast()
		c.mu.Unlock()
	}()
	for ; room > 0; room-- {
		if c.stoppedBy() != nil {
			return
		}
		if waiting, _ := c.db.GetWaitingCompaction(); !waiting || c.stoppedBy() != nil {
			return // stopped meanwhile: the compaction that stops it holds the DB's mutex
		}
		c.mu.Lock()
		c.running++ // before Schedule: the compaction may end, and call Done, before it returns
		c.mu.Unlock()
		if !c.db.Schedule(c) {
			c.mu.Lock()
			c.running--
			c.mu.Unlock()
			return
		}
	}
}

// stopCompactions stops the store's compactions after one failed with
// err, a corruption, and reports it once (EventCompactionsStopped). Pebble
// calls it holding its mutex: it takes only the store's own locks.
func (f *faults) stopCompactions(err error) {
	detail, file := err, "a table"
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		detail, file = info.Details, info.Path
	} else if files := f.files(); len(files) > 0 {
		file = strings.Join(files, ", ")
	}
	stop := fmt.Errorf("%w: a compaction met a corrupt table, %s (%v): the store runs no compaction until it is reopened; restore it from a backup", codec.ErrCorrupt, file, detail)
	if !f.s.compactions.stop(stop) {
		return
	}
	f.mu.Lock()
	e := f.updateHalted()
	f.mu.Unlock()
	f.emit(Event{Kind: EventCompactionsStopped, Error: stop, Info: "reads and writes go on, but L0 deepens with every flush and writes are refused before it is full; restore the store from a backup taken before the damage (test it with tipkv check)"})
	f.emitIf(e)
	go f.measureL0()
}

// l0Watch follows how deep L0 is once compactions have stopped. Pebble
// stops writes when L0 holds L0StopWritesThreshold sublevels, until
// compactions drain it; with none to run, a write or flush that met that
// stall would wait for ever. So the store refuses writes and flushes
// (full) while L0 is still l0Margin sublevels short of it.
//
// L0's depth is read from Pebble's metrics once, just after the stop
// (base, when flushes had counted baseFlushes); after that each flush that
// wrote a table counts as one sublevel more, at most what it adds, on the
// flush's own goroutine before Pebble lets another write through. So the
// refusal comes before the stall unless writes already admitted fill two
// memtables at once.
type l0Watch struct {
	stop    int          // Pebble's L0StopWritesThreshold
	full    atomic.Bool  // writes and flushes are refused
	flushes atomic.Int64 // flushes that wrote, since Open

	mu                sync.Mutex
	known             bool
	base, baseFlushes int64
}

// l0Margin is how many sublevels short of Pebble's L0StopWritesThreshold
// the store refuses writes once compactions are stopped.
const l0Margin = 2

// measureL0 reads L0's depth for l0Watch, once compactions have stopped,
// on a goroutine of its own: the stop comes with Pebble's mutex held.
func (f *faults) measureL0() {
	if <-f.s.opened; f.s.db == nil {
		return // Open failed; a compaction during Open stops them too
	}
	n := f.l0.flushes.Load()
	m, err := f.s.PebbleMetrics()
	if err != nil {
		return // closed
	}
	f.l0.mu.Lock()
	f.l0.known, f.l0.base, f.l0.baseFlushes = true, int64(m.Levels[0].Sublevels), n
	f.l0.mu.Unlock()
	f.checkL0()
}

// checkL0 refuses writes and flushes from now on if L0 may be within
// l0Margin sublevels of Pebble's stall (see l0Watch).
func (f *faults) checkL0() {
	f.l0.mu.Lock()
	known, depth := f.l0.known, f.l0.base+f.l0.flushes.Load()-f.l0.baseFlushes
	f.l0.mu.Unlock()
	if !known || depth < int64(f.l0.stop-l0Margin) || f.l0.full.Swap(true) {
		return
	}
	f.emit(Event{Kind: EventWritesRefused, Error: f.l0Error(), Info: fmt.Sprintf("L0 holds %d sublevels or more; Pebble stops writes at %d and compactions are stopped: new writes and flushes are refused until the store is reopened", depth, f.l0.stop)})
}

// l0Error is the error of a write or flush that l0Watch refuses.
func (f *faults) l0Error() error {
	return fmt.Errorf("tipkv: writes refused: compactions are stopped and L0 is nearly as deep as Pebble allows (a write would then wait for ever): %w", f.s.compactions.stoppedBy())
}
