// Command bench compares tipkv with the stores its users would otherwise
// pick, in one run: document versions against Badger v4 (managed mode) and
// raw Pebble with an ascending layout, queues against goque (LevelDB), dque,
// bigqueue and a naive Pebble queue, a latest value with history and a watch
// against NATS JetStream KV (an in-process nats-server, file storage), event
// feeds against Badger, unique inserts against River on SQLite
// (unique.go), and tipkv's queue through sqlkv against River on
// PostgreSQL, on one server the section starts (riverpg.go). It builds
// the same data set in each system, on disk under a temporary directory,
// prints markdown tables of time per operation with the ratio tipkv/peer
// and its 95% interval, and writes PNG charts.
//
//	cd bench && go run .            # full run, charts into ../docs
//	cd bench && go run . -quick     # tiny sizes, a check that it works
//	cd bench && go run . -only riverpg   # River on PostgreSQL (issue 28)
//
// Every ratio is tipkv's over the peer's (time or bytes): below 1 tipkv
// takes less, as in every other column, where lower is better. How rows
// are paired and when they stop is in paired.go.
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
	Only  string // comma-separated sections to run: versions, queues, kv, feeds, unique, riverpg, rewind
	Keep  bool   // keep the data directories

	MissFilter bool // tipkv's collection keeps versioned.Options.MissFilter

	Docs         int // documents with Versions versions each
	Versions     int
	LongDocs     int // documents with LongVersions versions each, for newest 100
	LongVersions int
	HotDocs      int // hot working set among Docs, fits the cache
	HotLong      int // hot working set among LongDocs
	ValueSize    int

	CacheSize    int64 // block cache budget of every store
	MemTableSize int64 // Pebble memtable (tipkv and raw Pebble)

	Quiet time.Duration // longest wait for background work to finish after a setup step

	// How rows are paired (paired.go).
	Chunk      time.Duration // length of a read chunk, per system per round
	MinRounds  int
	MaxRounds  int
	RowTime    time.Duration // a row stops at the first block of rounds past this
	Target     float64       // a row stops once every interval is within this fraction of its ratio
	ReadQuiet  time.Duration // quiet window that ends a read chunk
	WriteQuiet time.Duration // quiet window that ends a write chunk (Badger's: see writeQuiet)

	LoadBatch int // versions (events) per write batch of a load
	LoadChunk int // most versions (events) per system per round of a load; a load has at least loadRounds rounds
	PutChunk  int // commits per chunk of the put row
	SyncChunk int // commits per chunk of a synced row
	SyncDocs  int // documents in the stores of the synced put row

	Consumed      []int // consumed items at the head before measuring a dequeue
	TableConsumed []int // the levels that get a table row, and a row of batched dequeues
	DequeueItems  int   // most items a batched dequeue row takes per system; a single one takes a fifth
	DequeueBatch  int
	EnqueueBatch  int
	EnqueueItems  int // items per chunk of an enqueue row
	UniqueItems   int // items per chunk of an unsynced row of the unique section (River's inserts cost more than an enqueue)
	ChurnCycles   int
	ChurnLive     int
	ChurnSample   int // cycles between two disk samples
	ChurnChunk    int // cycles per system per round

	// The riverpg section (riverpg.go): tipkv through sqlkv and River on
	// one PostgreSQL server.
	PGInsertCalls   int   // calls of 1 per chunk of the insert rows (a tenth as many calls of EnqueueBatch)
	PGJobs          int   // jobs a burn-down works
	PGWorkers       []int // worker counts of the burn-down rows
	PGBurnRounds    int   // rounds of each burn-down row
	PGBurnPer       int   // most messages a tipkv burn-down worker takes per ReceiveWait
	PGLatencyJobs   int   // jobs per system per round of the latency rows
	PGLatencyRounds int
	// PGBurnRiverDefaults burns River down with its default fetch timing
	// instead of riverbench's.
	PGBurnRiverDefaults bool

	Streams      int // feed streams with Events events each
	Events       int
	HotStreams   int
	RangeEvents  int // events in a time-range read
	EventSpacing time.Duration

	// The kv section (kv.go): keys with KVVersions versions each, and
	// KVLongKeys with kvHistory (64) versions for the long history row.
	KVKeys     int
	KVVersions int
	KVLongKeys int
	WatchChunk int // put-and-deliver cycles per chunk of the watch row

	Seed uint64
}

func fullConfig() config {
	return config{
		Docs: 1_000_000, Versions: 10, LongDocs: 1_000, LongVersions: 200,
		HotDocs: 10_000, HotLong: 100, ValueSize: 100,
		CacheSize: 128 << 20, MemTableSize: 16 << 20,
		Quiet: 20 * time.Second,
		Chunk: 20 * time.Millisecond, MinRounds: 12, MaxRounds: 72, RowTime: 10 * time.Second, Target: 0.05,
		ReadQuiet: 5 * time.Millisecond, WriteQuiet: 20 * time.Millisecond,
		LoadBatch: 10_000, LoadChunk: 200_000, PutChunk: 1_000, SyncChunk: 20, SyncDocs: 1_000,
		Consumed:      []int{0, 10_000, 100_000, 1_000_000},
		TableConsumed: []int{0, 100_000, 1_000_000},
		DequeueItems:  100_000, DequeueBatch: 100,
		EnqueueBatch: 100, EnqueueItems: 10_000, UniqueItems: 200,
		PGInsertCalls: 50, PGJobs: 100_000, PGWorkers: []int{8, 32}, PGBurnRounds: 3, PGBurnPer: 100,
		PGLatencyJobs: 20, PGLatencyRounds: 12,
		ChurnCycles: 1_000_000, ChurnLive: 1_000, ChurnSample: 50_000, ChurnChunk: 25_000,
		Streams: 5_000, Events: 200, HotStreams: 100, RangeEvents: 20, EventSpacing: time.Second,
		KVKeys: 100_000, KVVersions: 10, KVLongKeys: 1_000, WatchChunk: 200,
		Seed: 1,
	}
}

func quickConfig() config {
	return config{
		Quick: true,
		Docs:  2_000, Versions: 10, LongDocs: 20, LongVersions: 200,
		HotDocs: 200, HotLong: 5, ValueSize: 100,
		CacheSize: 32 << 20, MemTableSize: 4 << 20,
		Quiet: time.Second,
		Chunk: 5 * time.Millisecond, MinRounds: 4, MaxRounds: 6, RowTime: time.Second, Target: 0.05,
		ReadQuiet: 2 * time.Millisecond, WriteQuiet: 10 * time.Millisecond,
		LoadBatch: 1_000, LoadChunk: 2_000, PutChunk: 50, SyncChunk: 3, SyncDocs: 100,
		Consumed:      []int{0, 1_000, 5_000},
		TableConsumed: []int{0, 1_000, 5_000},
		DequeueItems:  2_000, DequeueBatch: 100,
		EnqueueBatch: 100, EnqueueItems: 500, UniqueItems: 100,
		PGInsertCalls: 10, PGJobs: 2_000, PGWorkers: []int{8, 32}, PGBurnRounds: 1, PGBurnPer: 100,
		PGLatencyJobs: 5, PGLatencyRounds: 2,
		ChurnCycles: 5_000, ChurnLive: 100, ChurnSample: 500, ChurnChunk: 500,
		Streams: 100, Events: 200, HotStreams: 10, RangeEvents: 20, EventSpacing: time.Second,
		KVKeys: 1_000, KVVersions: 10, KVLongKeys: 20, WatchChunk: 20,
		Seed: 1,
	}
}

// plan is the stopping rule of a read row.
func (c config) plan() plan {
	return plan{minRounds: c.MinRounds, maxRounds: c.MaxRounds, maxTime: c.RowTime, target: c.Target}
}

// writePlan is the stopping rule of a write row with no fixed amount of
// work: the read rule, reporting the ratio of totals.
func (c config) writePlan() plan {
	p := c.plan()
	p.totals = true
	return p
}

// method says in a sentence how rows are paired, for the tables' notes.
func (c config) method() string {
	return fmt.Sprintf("Each row runs in rounds of one chunk per system, in an order that rotates from round to round. "+
		"A read row gives the median time over the rounds and the geometric mean of the per-round ratios tipkv/peer with its 95%% t-interval; "+
		"a write row (load, put, enqueue, dequeue, churn) gives the mean time, bursts included, and the ratio of the totals with its 95%% interval (delta method). "+
		"A row stops once every interval is within +-%.0f%% (at least %d rounds) or at %d rounds or %s (cap). "+
		"A read chunk lasts %s of the clock; every chunk ends when the process has been idle "+
		"for %s (reads) or %s (writes; Badger's %s), and that background work counts.",
		100*c.Target, c.MinRounds, c.MaxRounds, c.RowTime, c.Chunk, c.ReadQuiet, c.WriteQuiet, c.writeQuiet(sysBadger))
}

// loadRounds is the fewest rounds a load is cut into, for an interval with
// some degrees of freedom.
const loadRounds = 20

// loadPer returns how many of a load's n batches go into one chunk.
func (c config) loadPer(n int) int {
	return max(min(c.LoadChunk/c.LoadBatch, n/loadRounds), 1)
}

// writeQuiet is the quiet window that ends a write chunk of system.
// Pebble and LevelDB start a flush or compaction as soon as a write calls
// for one; Badger's compactors look for work every 50 ms, so its window
// spans two of their ticks.
func (c config) writeQuiet(system string) time.Duration {
	if system == sysBadger {
		return max(c.WriteQuiet, 100*time.Millisecond)
	}
	return c.WriteQuiet
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("bench: ")
	quick := flag.Bool("quick", false, "tiny sizes: checks that the command works, in well under a minute")
	out := flag.String("out", "../docs", "directory for the PNG charts")
	tmp := flag.String("tmp", "", "parent directory for the data sets (default: the system temp dir)")
	only := flag.String("only", "", "comma-separated sections to run: versions,queues,kv,feeds,unique,riverpg,rewind (default: all)")
	docs := flag.Int("docs", 0, "documents with 10 versions each (default 1,000,000; quick 2,000)")
	kvKeys := flag.Int("kvkeys", 0, "keys with 10 versions each in the kv section (default 100,000; quick 1,000)")
	cycles := flag.Int("cycles", 0, "enqueue/dequeue cycles of the churn test (default 1,000,000; quick 5,000)")
	chunk := flag.Duration("chunk", 0, "length of a read chunk, per system per round (default 20ms; quick 5ms)")
	rounds := flag.Int("rounds", 0, "most rounds of a row (default 72; quick 6)")
	target := flag.Float64("target", 0, "a row stops once every ratio's 95% interval is within this fraction of it (default 0.05)")
	memtable := flag.Int64("memtable", 0, "memtable size in bytes of tipkv and raw Pebble (default 16 MiB; quick 4 MiB)")
	missFilter := flag.Bool("missfilter", false, "open tipkv's collection with versioned.Options.MissFilter (an in-memory filter of its documents)")
	wall := flag.Bool("wall", false, "measure wall time instead of the process's CPU time")
	pgJobs := flag.Int("pgjobs", 0, "jobs of each burn-down of the riverpg section (default 100,000; quick 2,000)")
	pgRounds := flag.Int("pgrounds", 0, "rounds of each burn-down of the riverpg section (default 3; quick 1)")
	pgPer := flag.Int("pgper", 0, "most messages a tipkv burn-down worker takes per ReceiveWait in the riverpg section (default 100)")
	riverDefaults := flag.Bool("riverdefaults", false, "burn River down with its default fetch timing (at most 10 fetches a second) instead of riverbench's, in the riverpg section")
	keep := flag.Bool("keep", false, "keep the data directories (their path is printed)")
	flag.BoolVar(&verbose, "v", false, "log every round's time per system, for a look at the spread")
	flag.Parse()

	cpuClock = !*wall
	cfg := fullConfig()
	if *quick {
		cfg = quickConfig()
	}
	cfg.Out, cfg.Tmp, cfg.Only, cfg.Keep = *out, *tmp, *only, *keep
	cfg.MissFilter = *missFilter
	if *docs > 0 {
		cfg.Docs = *docs
		cfg.HotDocs = min(cfg.HotDocs, *docs)
	}
	if *kvKeys > 0 {
		cfg.KVKeys = *kvKeys
	}
	if *cycles > 0 {
		cfg.ChurnCycles = *cycles
		cfg.ChurnSample = max(*cycles/20, 1)
		cfg.ChurnChunk = max(*cycles/40, 1)
	}
	if *pgJobs > 0 {
		cfg.PGJobs = *pgJobs
	}
	if *pgRounds > 0 {
		cfg.PGBurnRounds = *pgRounds
	}
	cfg.PGBurnRiverDefaults = *riverDefaults
	if *pgPer > 0 {
		cfg.PGBurnPer = *pgPer
	}
	if *memtable > 0 {
		cfg.MemTableSize = *memtable
	}
	if *chunk > 0 {
		cfg.Chunk = *chunk
	}
	if *rounds > 0 {
		cfg.MaxRounds = *rounds
		cfg.MinRounds = min(cfg.MinRounds, *rounds)
	}
	if *target > 0 {
		cfg.Target = *target
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
	fmt.Fprintf(w, "%s, GOMAXPROCS=%d, %s/%s, data on disk under %s, times are %s unless a row says otherwise. "+
		"Every ratio is tipkv / peer (time or bytes), [its 95%% interval]: below 1 tipkv takes less; each table's note says how its rows compute it. "+
		"Load average at the start: %s.\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, filepath.Dir(dir), measured, loadAvg())
	if want("versions") {
		load0 := loadAvg()
		res, err := runVersions(cfg, dir)
		if err != nil {
			return fmt.Errorf("versions: %w", err)
		}
		res.table.loadNote(load0)
		res.table.write(w)
		if err := readCostChart(res.table, "Document reads", cfg.Out, "read-cost.png"); err != nil {
			return err
		}
		if err := ratioChart(res.table, "Document versions", cfg.Out, "ratios-versions.png"); err != nil {
			return err
		}
	}
	if want("queues") {
		load0 := loadAvg()
		res, err := runQueues(cfg, dir)
		if err != nil {
			return fmt.Errorf("queues: %w", err)
		}
		res.table.loadNote(load0)
		res.table.write(w)
		if err := dequeueChart(res, cfg.Out, "dequeue-vs-consumed.png"); err != nil {
			return err
		}
		if err := churnChart(res, cfg.Out, "disk-over-churn.png"); err != nil {
			return err
		}
		if err := ratioChart(res.table, "Queues", cfg.Out, "ratios-queues.png"); err != nil {
			return err
		}
	}
	if want("kv") {
		load0 := loadAvg()
		res, err := runKV(cfg, dir)
		if err != nil {
			return fmt.Errorf("kv: %w", err)
		}
		res.table.loadNote(load0)
		res.table.write(w)
		if err := readCostChart(res.table, "Latest value with history", cfg.Out, "kv-read-cost.png"); err != nil {
			return err
		}
		if err := ratioChart(res.table, "Latest value with history", cfg.Out, "ratios-kv.png"); err != nil {
			return err
		}
	}
	if want("feeds") {
		load0 := loadAvg()
		res, err := runFeeds(cfg, dir)
		if err != nil {
			return fmt.Errorf("feeds: %w", err)
		}
		res.table.loadNote(load0)
		res.table.write(w)
		if err := readCostChart(res.table, "Feed reads", cfg.Out, "feed-read-cost.png"); err != nil {
			return err
		}
		if err := ratioChart(res.table, "Event feeds", cfg.Out, "ratios-feeds.png"); err != nil {
			return err
		}
	}
	if want("unique") {
		load0 := loadAvg()
		res, err := runUnique(cfg, dir)
		if err != nil {
			return fmt.Errorf("unique: %w", err)
		}
		res.table.loadNote(load0)
		res.table.write(w)
	}
	if want("riverpg") {
		load0 := loadAvg()
		res, err := runRiverPG(cfg)
		if err != nil {
			return fmt.Errorf("riverpg: %w", err)
		}
		res.table.loadNote(load0)
		res.table.write(w)
		if err := ratioChart(res.table, "Queues on PostgreSQL", cfg.Out, "ratios-riverpg.png"); err != nil {
			return err
		}
		if err := latencyChart(res, cfg.Out, "riverpg-latency.png"); err != nil {
			return err
		}
	}
	if want("rewind") {
		load0 := loadAvg()
		res, err := runRewind(cfg, dir)
		if err != nil {
			return fmt.Errorf("rewind: %w", err)
		}
		res.table.loadNote(load0)
		res.table.write(w)
	}
	fmt.Fprintf(w, "Total wall time: %s. Load average at the end: %s. Charts in %s.\n", time.Since(start).Round(time.Second), loadAvg(), cfg.Out)
	return nil
}

// loadNote adds the machine's load at the start and the end of the
// section to t's notes: the figures depend on it.
func (t *table) loadNote(start string) {
	t.notes = append(t.notes, fmt.Sprintf("Load average (1, 5, 15 minutes) at the start of this section: %s; at its end: %s.", start, loadAvg()))
}

// loadAvg returns the machine's load averages over 1, 5 and 15 minutes,
// from /proc/loadavg ("unknown" where there is none).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

// verbose makes the progress log list every round's times.
var verbose bool

// progress reports what the run is doing, on stderr, so that the tables on
// stdout stay clean.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
