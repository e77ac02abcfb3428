// Command bench compares tipkv with the stores its users would otherwise
// pick, in one run: document versions against Badger v4 (managed mode) and
// raw Pebble with an ascending layout, queues against goque (LevelDB) and a
// naive Pebble queue, event feeds against Badger. It builds the same data
// set in each system, on disk under a temporary directory, prints markdown
// tables of time per operation with the ratio peer/tipkv, and writes PNG
// charts.
//
//	cd bench && go run .            # full run, charts into ../docs
//	cd bench && go run . -quick     # tiny sizes, a check that it works
//
// A ratio above 1 means the peer takes longer than tipkv: tipkv is ahead.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// config holds every size and budget of a run. full and quick give the two
// presets; flags override single fields.
type config struct {
	Quick bool
	Out   string // where the PNG charts go
	Tmp   string // parent of the data directories
	Only  string // comma-separated sections to run: versions, queues, feeds
	Keep  bool   // keep the data directories

	Docs         int // documents with Versions versions each
	Versions     int
	LongDocs     int // documents with LongVersions versions each, for newest 100
	LongVersions int
	HotDocs      int // hot working set among Docs, fits the cache
	HotLong      int // hot working set among LongDocs
	ValueSize    int

	CacheSize    int64 // block cache budget of every store
	MemTableSize int64 // Pebble memtable (tipkv and raw Pebble)

	Quiet  time.Duration // longest wait for background work to finish after a setup step
	Rounds int           // interleaved rounds per read row
	Cell   time.Duration // time per system per round per read row

	Consumed      []int // consumed items at the head before measuring a dequeue
	TableConsumed []int // the levels that get a table row
	DequeueOps    int   // most dequeues measured per level
	DequeueTime   time.Duration
	EnqueueBatch  int
	ChurnCycles   int
	ChurnLive     int
	ChurnSample   int

	Streams      int // feed streams with Events events each
	Events       int
	HotStreams   int
	RangeEvents  int // events in a time-range read
	EventSpacing time.Duration

	Seed uint64
}

func fullConfig() config {
	return config{
		Docs: 1_000_000, Versions: 10, LongDocs: 1_000, LongVersions: 200,
		HotDocs: 10_000, HotLong: 100, ValueSize: 100,
		CacheSize: 128 << 20, MemTableSize: 16 << 20,
		Quiet: 20 * time.Second, Rounds: 10, Cell: 200 * time.Millisecond,
		Consumed:      []int{0, 1_000, 10_000, 100_000, 1_000_000},
		TableConsumed: []int{0, 100_000, 1_000_000},
		DequeueOps:    200, DequeueTime: 2 * time.Second,
		EnqueueBatch: 100, ChurnCycles: 1_000_000, ChurnLive: 1_000, ChurnSample: 50_000,
		Streams: 5_000, Events: 200, HotStreams: 100, RangeEvents: 20, EventSpacing: time.Second,
		Seed: 1,
	}
}

func quickConfig() config {
	return config{
		Quick: true,
		Docs:  2_000, Versions: 10, LongDocs: 20, LongVersions: 200,
		HotDocs: 200, HotLong: 5, ValueSize: 100,
		CacheSize: 32 << 20, MemTableSize: 4 << 20,
		Quiet: time.Second, Rounds: 2, Cell: 10 * time.Millisecond,
		Consumed:      []int{0, 1_000, 5_000},
		TableConsumed: []int{0, 1_000, 5_000},
		DequeueOps:    50, DequeueTime: 200 * time.Millisecond,
		EnqueueBatch: 100, ChurnCycles: 5_000, ChurnLive: 100, ChurnSample: 500,
		Streams: 100, Events: 200, HotStreams: 10, RangeEvents: 20, EventSpacing: time.Second,
		Seed: 1,
	}
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("bench: ")
	quick := flag.Bool("quick", false, "tiny sizes: checks that the command works, in well under a minute")
	out := flag.String("out", "../docs", "directory for the PNG charts")
	tmp := flag.String("tmp", "", "parent directory for the data sets (default: the system temp dir)")
	only := flag.String("only", "", "comma-separated sections to run: versions,queues,feeds (default: all)")
	docs := flag.Int("docs", 0, "documents with 10 versions each (default 1,000,000; quick 2,000)")
	cycles := flag.Int("cycles", 0, "enqueue/dequeue cycles of the churn test (default 1,000,000; quick 5,000)")
	cell := flag.Duration("cell", 0, "time per system per round of each read row (default 200ms; quick 10ms)")
	rounds := flag.Int("rounds", 0, "interleaved rounds per read row (default 10; quick 2)")
	memtable := flag.Int64("memtable", 0, "memtable size in bytes of tipkv and raw Pebble (default 16 MiB; quick 4 MiB)")
	wall := flag.Bool("wall", false, "measure wall time instead of the process's CPU time")
	keep := flag.Bool("keep", false, "keep the data directories (their path is printed)")
	flag.Parse()

	cpuClock = !*wall
	cfg := fullConfig()
	if *quick {
		cfg = quickConfig()
	}
	cfg.Out, cfg.Tmp, cfg.Only, cfg.Keep = *out, *tmp, *only, *keep
	if *docs > 0 {
		cfg.Docs = *docs
		cfg.HotDocs = min(cfg.HotDocs, *docs)
	}
	if *cycles > 0 {
		cfg.ChurnCycles = *cycles
		cfg.ChurnSample = max(*cycles/20, 1)
	}
	if *memtable > 0 {
		cfg.MemTableSize = *memtable
	}
	if *cell > 0 {
		cfg.Cell = *cell
	}
	if *rounds > 0 {
		cfg.Rounds = *rounds
	}
	if err := run(cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run runs the sections cfg asks for, prints their tables to w and writes
// the charts into cfg.Out.
func run(cfg config, w io.Writer) error {
	start := time.Now()
	dir, err := os.MkdirTemp(cfg.Tmp, "tipkv-bench-")
	if err != nil {
		return err
	}
	if cfg.Keep {
		progress("data directories under %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	want := func(section string) bool {
		if cfg.Only == "" {
			return true
		}
		for _, s := range strings.Split(cfg.Only, ",") {
			if strings.TrimSpace(s) == section {
				return true
			}
		}
		return false
	}

	fmt.Fprintf(w, "# tipkv peer comparison\n\n")
	measured := "process CPU time (user + system, all goroutines)"
	if !cpuClock {
		measured = "wall time"
	}
	fmt.Fprintf(w, "%s, GOMAXPROCS=%d, %s/%s, data on disk under %s, times are %s. Ratio = peer time / tipkv time: above 1 means tipkv is ahead.\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, filepath.Dir(dir), measured)
	if want("versions") {
		res, err := runVersions(cfg, dir)
		if err != nil {
			return fmt.Errorf("versions: %w", err)
		}
		res.table.write(w)
		if err := readCostChart(res.table, "Document reads", cfg.Out, "read-cost.png"); err != nil {
			return err
		}
	}
	if want("queues") {
		res, err := runQueues(cfg, dir)
		if err != nil {
			return fmt.Errorf("queues: %w", err)
		}
		res.table.write(w)
		if err := dequeueChart(res, cfg.Out, "dequeue-vs-consumed.png"); err != nil {
			return err
		}
		if err := churnChart(res, cfg.Out, "disk-over-churn.png"); err != nil {
			return err
		}
	}
	if want("feeds") {
		res, err := runFeeds(cfg, dir)
		if err != nil {
			return fmt.Errorf("feeds: %w", err)
		}
		res.table.write(w)
		if err := readCostChart(res.table, "Feed reads", cfg.Out, "feed-read-cost.png"); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "Total wall time: %s. Charts in %s.\n", time.Since(start).Round(time.Second), cfg.Out)
	return nil
}

// progress reports what the run is doing, on stderr, so that the tables on
// stdout stay clean.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
