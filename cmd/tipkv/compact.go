package main

import (
	"flag"
	"fmt"
	"time"
)

var compactCommand = &command{
	name:    "compact",
	args:    []string{"DIR"},
	summary: "compact the store family by family, reclaiming deleted space",
	help: `
Flushes the memtable, then compacts the store one key family at a time
(meta, versions, queue-items, queue-state, feed, dead-letters, then any
other keys), printing progress on stderr, and reports the size on disk
before and after. Compaction drops deleted versions, consumed queue
messages and their tombstones; it can take long on a large store.

compact opens the store for writing: stop the process that uses the store
first. Disk usage falls as Pebble deletes the old files, which may finish
shortly after the command returns.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		return func(c *ctx, args []string) int { return compact(c, args[0]) }
	},
}

// tickEvery is how often a long compaction step says it is still at work.
var tickEvery = 10 * time.Second

// ticker prints a line on stderr every tickEvery until stop is called, so
// that a long step shows it is alive.
func ticker(c *ctx, name string, start time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(tickEvery)
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

type compactStep struct {
	name    string
	lo, hi  []byte
	elapsed time.Duration
}

func compactSteps() []*compactStep {
	var steps []*compactStep
	for _, f := range families {
		lo, hi := familyRange(f.id)
		steps = append(steps, &compactStep{name: f.name, lo: lo, hi: hi})
	}
	last := families[len(families)-1].id
	return append(steps, &compactStep{name: "other", lo: []byte{byte(last) + 1}, hi: keyspaceEnd})
}

func compact(c *ctx, dir string) int {
	s, code := c.openStore(dir, true)
	if s == nil {
		return code
	}
	defer s.close()

	start := time.Now()
	before := s.db.DiskUsage()
	fmt.Fprintf(c.stderr, "compacting %s (%s on disk)\n", dir, size(before))
	if err := s.db.Flush(); err != nil {
		return c.failf(exitFail, "flush: %v", err)
	}
	steps := compactSteps()
	for i, st := range steps {
		fmt.Fprintf(c.stderr, "  %d/%d %-13s ", i+1, len(steps), st.name)
		t := time.Now()
		stop := ticker(c, st.name, t)
		err := s.kv.Compact(st.lo, st.hi)
		stop()
		if err != nil {
			fmt.Fprintln(c.stderr)
			return c.failf(exitFail, "compact %s: %v", st.name, err)
		}
		st.elapsed = time.Since(t)
		fmt.Fprintf(c.stderr, "done in %s, %s on disk\n", st.elapsed.Round(time.Millisecond), size(s.db.DiskUsage()))
	}
	after := s.db.DiskUsage()
	elapsed := time.Since(start)

	var err error
	if c.json {
		list := []any{}
		for _, st := range steps {
			list = append(list, object{{"range", st.name}, {"seconds", st.elapsed.Seconds()}})
		}
		err = writeJSON(c.stdout, object{
			{"dir", dir}, {"disk_before", before}, {"disk_after", after},
			{"seconds", elapsed.Seconds()}, {"steps", list},
		})
	} else {
		_, err = fmt.Fprintf(c.stdout, "compacted %s: %s -> %s on disk in %s\n",
			dir, size(before), size(after), elapsed.Round(time.Millisecond))
	}
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	return exitOK
}
