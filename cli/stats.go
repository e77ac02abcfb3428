package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/queue"
)

var statsCommand = &command{
	name:    "stats",
	args:    []string{"DIR"},
	summary: "count families, collections, streams and queues; disk and LSM shape",
	help: `
Reads every key once and reports:

  - per family: keys, key bytes and value bytes (and keys of families tipkv
    does not write, if any);
  - per collection: documents and versions;
  - per stream: events, oldest and newest position;
  - per queue: depth (messages in the queue), head (the oldest sequence
    number not yet consumed), tail (the sequence number the next enqueue
    gets) and dead letters, as tipkv queue shows them; --json adds the
    head and tail the queue's state key records (lower bounds the queue
    corrects when it opens);
  - the store's size on disk, and the LSM tree from Pebble's metrics: per
    non-empty level its tables, bytes, compaction score, entries and
    tombstones (counted from sstable properties; memtables are not
    counted). --json lists every level.
  - the engine's figures, as DB.Metrics gives them to a service:
    tombstones (Pebble's estimate), compaction debt, memtables, WAL,
    obsolete tables, block cache. --json has them all under "metrics",
    counters included; those count from this command's own open of the
    store, so a service watches them on its DB.Metrics instead.

--no-scan skips reading every key (families, collections, streams and
queues): on a large store it gives the figures at once. To look at the
store of a running service, run stats on a copy of it (tipkv backup, or
the service's DB.Checkpoint).`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		noScan := fs.Bool("no-scan", false, "skip reading every key: only the disk, LSM and engine figures")
		return func(c *ctx, args []string) int { return stats(c, args[0], *noScan) }
	},
}

type familyStats struct {
	id                       byte
	keys, keyBytes, valBytes uint64
}

type collectionStats struct {
	name           []byte
	docs, versions uint64
	lastID         []byte
}

type streamStats struct {
	name           []byte
	events         uint64
	newest, oldest int64
}

type queueStats struct {
	name  string
	dead  uint64
	state *queueState
	// What the queue package reports when it opens the queue, as tipkv
	// queue shows it; err when it did not open.
	depth       int
	head, tail  int64
	paused      bool
	maxInFlight int
	err         error
}

type storeStats struct {
	noScan        bool // the keys were not read
	keys, badKeys uint64
	families      []*familyStats
	collections   []*collectionStats
	streams       []*streamStats
	queues        map[string]*queueStats
}

func (st *storeStats) family(id byte) *familyStats {
	for _, f := range st.families {
		if f.id == id {
			return f
		}
	}
	f := &familyStats{id: id}
	st.families = append(st.families, f)
	return f
}

func (st *storeStats) queue(name []byte) *queueStats {
	q, ok := st.queues[string(name)]
	if !ok {
		q = &queueStats{name: string(name)}
		st.queues[string(name)] = q
	}
	return q
}

// add counts one key.
func (st *storeStats) add(k key, v []byte) {
	st.keys++
	f := st.family(k.raw0())
	f.keys++
	f.keyBytes += uint64(len(k.raw))
	f.valBytes += uint64(len(v))
	if !k.complete() {
		st.badKeys++
		return
	}
	switch k.fam.Family {
	case codec.FamilyVersions:
		var c *collectionStats
		if n := len(st.collections); n > 0 && string(st.collections[n-1].name) == string(k.segs[0]) {
			c = st.collections[n-1]
		} else {
			c = &collectionStats{name: k.segs[0]}
			st.collections = append(st.collections, c)
		}
		if c.docs == 0 || string(c.lastID) != string(k.segs[1]) {
			c.docs++
			c.lastID = k.segs[1]
		}
		c.versions++
	case codec.FamilyFeed:
		if k.num == 0 {
			break // the stream's trim mark, not an event
		}
		n := len(st.streams)
		if n == 0 || string(st.streams[n-1].name) != string(k.segs[0]) {
			st.streams = append(st.streams, &streamStats{name: k.segs[0], newest: k.num})
			n++
		}
		s := st.streams[n-1]
		s.events++
		s.oldest = k.num
	case codec.FamilyQueueItems:
		st.queue(k.segs[0])
	case codec.FamilyDeadLetters:
		st.queue(k.segs[0]).dead++
	case codec.FamilyQueueControl:
		st.queue(k.segs[0]) // paused or capped: read
	case codec.FamilyQueueState:
		q := st.queue(k.segs[0])
		if s, err := parseQueueState(v); err == nil {
			q.state = &s
		}
	}
}

func (st *storeStats) sortedQueues() []*queueStats {
	out := make([]*queueStats, 0, len(st.queues))
	for _, q := range st.queues {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b *queueStats) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return out
}

// shaper is a store that can describe its LSM tree: the Pebble store.
type shaper interface {
	Shape() (pebblestore.Shape, error)
}

func stats(c *ctx, dir string, noScan bool) int {
	s, code := c.openStore(dir, false)
	if s == nil {
		return code
	}
	defer s.close()
	v, err := fetchStats(s, noScan)
	if err != nil {
		return c.failed(err)
	}
	if code := c.show(v); code != exitOK {
		return code
	}
	if v.queueErr != nil {
		return c.failf(exitFail, "%v (tipkv check lists the problems)", v.queueErr)
	}
	return exitOK
}

// statsView is what stats shows: the counts of a scan of every key (unless
// noScan), the size on disk, the LSM's shape when the engine has one, and
// the engine's figures.
type statsView struct {
	dir     string
	disk    uint64
	st      *storeStats
	shape   *pebblestore.Shape // nil: the engine has no LSM to describe
	metrics tipkv.Metrics
	// queueErr is the first error of a queue that did not open: the queue
	// is listed with it, and the command fails after showing the rest.
	queueErr error
}

// fetchStats reads every key once (unless noScan), opens every queue it
// found as the queue package does, and reads the engine's figures.
func fetchStats(s *store, noScan bool) (*statsView, error) {
	st := &storeStats{queues: map[string]*queueStats{}, noScan: noScan}
	v := &statsView{dir: s.dir, st: st}
	if !noScan {
		for _, f := range families {
			st.family(byte(f.Family))
		}
		lo, hi := codec.Keyspace()
		err := s.scan(lo, hi, func(k, v []byte) error {
			st.add(decodeKey(k), v)
			return nil
		})
		if err != nil {
			return nil, err
		}
		slices.SortFunc(st.families, func(a, b *familyStats) int { return int(a.id) - int(b.id) })
		for _, q := range st.sortedQueues() {
			q.read(s)
			if q.err != nil && v.queueErr == nil {
				v.queueErr = q.err
			}
		}
	}
	if sh, ok := s.kv.(shaper); ok {
		shape, err := sh.Shape()
		if err != nil {
			return nil, err
		}
		v.shape = &shape
	}
	m, err := s.db.Metrics()
	if err != nil {
		return nil, err
	}
	v.metrics, v.disk = m, s.db.DiskUsage()
	return v, nil
}

func (v *statsView) json() object {
	return append(v.st.json(v.dir, v.disk, v.shape), field{"metrics", metricsJSON(v.metrics)})
}

func (v *statsView) table(w io.Writer) error {
	if err := v.st.print(w, v.dir, v.disk, v.shape); err != nil {
		return err
	}
	if v.metrics.Storage.Levels == nil {
		return nil
	}
	return printMetrics(w, v.metrics)
}

// read fills in the queue's depth, head and tail as the queue package
// reports them when it opens the queue: the one definition tipkv queue
// shows too.
func (q *queueStats) read(s *store) {
	qu, err := queue.Open(s.db, q.name, &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1})
	if err != nil {
		q.err = err
		return
	}
	st := qu.Stats()
	q.depth, q.head, q.tail = st.Len, st.Head, st.Tail
	q.paused, q.maxInFlight = st.Paused, st.MaxInFlight
}

func (st *storeStats) json(dir string, disk uint64, shape *pebblestore.Shape) object {
	fams := []any{}
	for _, f := range st.families {
		fams = append(fams, object{{"family", familyName(f.id)}, {"id", f.id}, {"keys", f.keys}, {"key_bytes", f.keyBytes}, {"value_bytes", f.valBytes}})
	}
	colls := []any{}
	for _, c := range st.collections {
		colls = append(colls, object{{"collection", segmentJSON(c.name)}, {"documents", c.docs}, {"versions", c.versions}})
	}
	streams := []any{}
	for _, s := range st.streams {
		streams = append(streams, object{{"stream", segmentJSON(s.name)}, {"events", s.events}, {"oldest", s.oldest}, {"newest", s.newest}})
	}
	queues := []any{}
	for _, q := range st.sortedQueues() {
		var state any
		if q.state != nil {
			state = object{{"head", q.state.head}, {"tail", q.state.tail}}
		}
		o := object{{"queue", segmentJSON([]byte(q.name))}}
		if q.err != nil {
			o = append(o, field{"error", q.err.Error()})
		} else {
			o = append(o, field{"depth", q.depth}, field{"head", q.head}, field{"tail", q.tail}, field{"paused", q.paused}, field{"max_in_flight", q.maxInFlight})
		}
		queues = append(queues, append(o, field{"dead", q.dead}, field{"state", state}))
	}
	out := object{{"dir", dir}, {"disk_usage", disk}}
	if !st.noScan {
		out = append(out, object{
			{"keys", st.keys}, {"bad_keys", st.badKeys},
			{"families", fams}, {"collections", colls}, {"streams", streams}, {"queues", queues},
		}...)
	}
	if shape != nil {
		levels := []any{}
		var point, rng uint64
		for _, l := range shape.Levels {
			point += l.PointTombstones
			rng += l.RangeTombstones
			levels = append(levels, object{
				{"level", l.Level}, {"sublevels", l.Sublevels}, {"tables", l.Tables}, {"bytes", l.Bytes},
				{"score", l.Score}, {"entries", l.Entries},
				{"point_tombstones", l.PointTombstones}, {"range_tombstones", l.RangeTombstones},
			})
		}
		out = append(out, field{"lsm", object{
			{"read_amp", shape.ReadAmp}, {"memtables", shape.MemTables}, {"memtable_bytes", shape.MemTableBytes},
			{"wal_files", shape.WALFiles}, {"wal_bytes", shape.WALBytes},
			{"point_tombstones", point}, {"range_tombstones", rng}, {"levels", levels},
		}})
	}
	return out
}

func (st *storeStats) print(w io.Writer, dir string, disk uint64, shape *pebblestore.Shape) error {
	t := newTable(w)
	t.row("store", dir)
	t.row("disk", size(disk))
	if st.noScan {
		if err := t.flush(); err != nil {
			return err
		}
		return printShape(w, shape)
	}
	keys := fmt.Sprint(st.keys)
	if st.badKeys > 0 {
		keys += fmt.Sprintf(" (%d not in tipkv's layout: run tipkv check)", st.badKeys)
	}
	t.row("keys", keys)
	if err := t.flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	t = newTable(w, "FAMILY", "KEYS", "KEY BYTES", "VALUE BYTES")
	for _, f := range st.families {
		t.row(familyName(f.id), f.keys, size(f.keyBytes), size(f.valBytes))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(st.collections) > 0 {
		fmt.Fprintln(w)
		t = newTable(w, "COLLECTION", "DOCUMENTS", "VERSIONS")
		for _, c := range st.collections {
			t.row(quoteIfNeeded(string(c.name)), c.docs, c.versions)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(st.streams) > 0 {
		fmt.Fprintln(w)
		t = newTable(w, "STREAM", "EVENTS", "OLDEST", "NEWEST")
		for _, s := range st.streams {
			t.row(quoteIfNeeded(string(s.name)), s.events, positionTime(s.oldest), positionTime(s.newest))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(st.queues) > 0 {
		fmt.Fprintln(w)
		t = newTable(w, "QUEUE", "DEPTH", "HEAD", "TAIL", "DEAD", "PAUSED", "MAX IN FLIGHT")
		for _, q := range st.sortedQueues() {
			if q.err != nil {
				t.row(quoteIfNeeded(q.name), "-", "-", "-", q.dead, "-", "-", q.err)
				continue
			}
			paused, capped := "no", "-"
			if q.paused {
				paused = "yes"
			}
			if q.maxInFlight > 0 {
				capped = strconv.Itoa(q.maxInFlight)
			}
			t.row(quoteIfNeeded(q.name), q.depth, q.head, q.tail, q.dead, paused, capped)
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, queueLegend)
	}
	return printShape(w, shape)
}

// printShape writes the LSM tree's shape, if the engine has one.
func printShape(w io.Writer, shape *pebblestore.Shape) error {
	if shape == nil {
		return nil
	}
	fmt.Fprintf(w, "\nLSM: read amplification %d, %d memtable(s) of %s, WAL %d file(s) of %s\n",
		shape.ReadAmp, shape.MemTables, size(shape.MemTableBytes), shape.WALFiles, size(shape.WALBytes))
	var tables, bytes int64
	var entries, point, rng uint64
	for _, l := range shape.Levels {
		tables += l.Tables
		bytes += l.Bytes
		entries += l.Entries
		point += l.PointTombstones
		rng += l.RangeTombstones
	}
	if tables == 0 {
		_, err := fmt.Fprintln(w, "no sstables yet: every key is in the memtable")
		return err
	}
	t := newTable(w, "LEVEL", "TABLES", "SIZE", "SCORE", "ENTRIES", "POINT TOMBSTONES", "RANGE TOMBSTONES")
	for _, l := range shape.Levels {
		if l.Tables > 0 {
			t.row(fmt.Sprintf("L%d", l.Level), l.Tables, size(uint64(l.Bytes)), fmt.Sprintf("%.2f", l.Score), l.Entries, l.PointTombstones, l.RangeTombstones)
		}
	}
	t.row("total", tables, size(uint64(bytes)), "", entries, point, rng)
	return t.flush()
}
