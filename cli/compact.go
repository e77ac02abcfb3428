package cli

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/tipkv/tipkv/engine"
	storecheck "github.com/tipkv/tipkv/internal/check"
)

var compactCommand = &command{
	name:    "compact",
	args:    []string{"DIR"},
	summary: "compact the store family by family, reclaiming deleted space",
	help: `
Flushes the memtable, then compacts the store one key family at a time,
in key order, then the keys of no family:

  ` + familyNames() + `

It prints on stderr each step's estimated size on disk and, every 10
seconds of a long step, that it is still at work. It reports the size on
disk and the tombstones in sstables before and after.

Compaction drops pruned versions, consumed queue messages and trimmed
events, and the tombstones that covered them. Pebble keeps a tombstone
that reached the bottom level with nothing left under it until its own
background work drops it. The first step also takes in the newest tables,
which span every family, so it is often the longest. It can take long on a
large store.

compact opens the store for writing: stop the process that uses the store
first. It never creates a store: a missing or empty DIR is refused. Pebble
deletes the files a compaction made obsolete in the background; compact
waits for that (it closes the store, which waits, and reopens it to
measure), so the size after is what is on disk when it returns.

A table that fails its checksums cannot be compacted: compact stops at the
first compaction that meets it and exits with status 1 and an error that
names the table. Restore the store from a backup.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		return func(c *ctx, args []string) int { return compact(c, args[0]) }
	},
}

// ticker prints a line on stderr every knobs.tickEvery until stop is called, so
// that a long step shows it is alive.
func ticker(c *ctx, name string, start time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(knobs.tickEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(c.stderr, "\n      still compacting %s (%s) ", name, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// compactStep is the compaction of one range: a family's keys, or keys
// of no family.
type compactStep struct {
	storecheck.Range
	elapsed time.Duration
}

// compactSteps compacts the ranges check reads: each family in key order,
// then what is left of the keyspace.
func compactSteps() []*compactStep {
	var steps []*compactStep
	for _, r := range storecheck.Ranges() {
		steps = append(steps, &compactStep{Range: r})
	}
	return steps
}

// lsmEngine is what compact asks of the Pebble store beyond engine.Store.
type lsmEngine interface {
	shaper
	EstimateDiskUsage(lo, hi []byte) (uint64, error)
}

// tombstones counts the tombstones in sstables, or -1 when the store
// cannot say.
func tombstones(s *store) int64 {
	e, ok := s.kv.(lsmEngine)
	if !ok {
		return -1
	}
	sh, err := e.Shape()
	if err != nil {
		return -1
	}
	var n uint64
	for _, l := range sh.Levels {
		n += l.PointTombstones + l.RangeTombstones
	}
	return int64(n)
}

func compact(c *ctx, dir string) int {
	if code := c.pebbleOnly(dir); code != exitOK {
		return code
	}
	s, code := c.openStore(dir, true)
	if s == nil {
		return code
	}
	defer func() {
		if s != nil {
			s.close()
		}
	}()

	start := time.Now()
	before := s.db.DiskUsage()
	if err := s.db.Flush(); err != nil {
		return c.failf(exitFail, "flush: %v", err)
	}
	tombsBefore := tombstones(s) // the memtable's too, now in an sstable
	fmt.Fprintf(c.stderr, "compacting %s: %s on disk\n", dir, size(before))
	steps := compactSteps()
	for i, st := range steps {
		est := ""
		if e, ok := s.kv.(lsmEngine); ok {
			if n, err := e.EstimateDiskUsage(st.Lo, st.Hi); err == nil {
				est = size(n)
			}
		}
		fmt.Fprintf(c.stderr, "  %d/%d %-13s %9s  ", i+1, len(steps), st.Name, est)
		t := time.Now()
		stop := ticker(c, st.Name, t)
		err := s.kv.(engine.Admin).Compact(st.Lo, st.Hi)
		stop()
		if err != nil {
			fmt.Fprintln(c.stderr)
			return c.failf(exitFail, "compact %s: %v", st.Name, err)
		}
		st.elapsed = time.Since(t)
		fmt.Fprintf(c.stderr, "done in %s\n", st.elapsed.Round(time.Millisecond))
	}

	// Pebble deletes the files a compaction made obsolete in the
	// background, paced, after Compact returns; until then they count in
	// its disk usage. Close waits for every pending deletion, so the size
	// after is read from the store reopened, as a later stats would.
	if err := s.db.Close(); err != nil {
		s = nil
		return c.failf(exitFail, "close: %v", err)
	}
	if s, code = c.openStore(dir, false); s == nil {
		return code
	}
	v := &compactView{dir: dir, steps: steps, diskBefore: before, tombsBefore: tombsBefore}
	v.diskAfter, v.tombsAfter = s.db.DiskUsage(), tombstones(s)
	v.elapsed = time.Since(start)
	return c.show(v)
}

// compactView is what compact did: the size on disk and the tombstones
// in sstables before and after, and how long each step took.
type compactView struct {
	dir                     string
	steps                   []*compactStep
	diskBefore, diskAfter   uint64
	tombsBefore, tombsAfter int64 // -1: the engine cannot say
	elapsed                 time.Duration
}

func (v *compactView) json() object {
	list := []any{}
	for _, st := range v.steps {
		list = append(list, object{{"range", st.Name}, {"seconds", st.elapsed.Seconds()}})
	}
	return object{
		{"dir", v.dir}, {"disk_before", v.diskBefore}, {"disk_after", v.diskAfter},
		{"tombstones_before", v.tombsBefore}, {"tombstones_after", v.tombsAfter},
		{"seconds", v.elapsed.Seconds()}, {"steps", list},
	}
}

func (v *compactView) table(w io.Writer) error {
	_, err := fmt.Fprintf(w, "compacted %s in %s: %s -> %s on disk, %d -> %d tombstones in sstables\n",
		v.dir, v.elapsed.Round(time.Millisecond), size(v.diskBefore), size(v.diskAfter), v.tombsBefore, v.tombsAfter)
	return err
}
