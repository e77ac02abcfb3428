package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"
)

// errMissing is what a versionStore read returns for a document that does
// not exist (or has no version at or below the one asked for).
var errMissing = errors.New("missing")

// A versionStore keeps documents as histories of versions 1, 2, 3, ...
// Every system in the versions section implements it the way its users
// would: tipkv with its versioned package, Badger with managed-mode commit
// timestamps, raw Pebble with an ascending key layout.
type versionStore interface {
	// put writes whole documents: every version of each, ascending.
	put(recs []record) error
	// settle makes the data set what reads run against: memtables flushed
	// and the LSM tree compacted.
	settle() error
	// latest returns the newest version of id.
	latest(id string) (int64, error)
	// asOf returns the greatest version of id at or below v.
	asOf(id string, v int64) (int64, error)
	// newest reads the n newest versions of id, values included, and
	// returns how many it read and the version of the last (oldest) one.
	newest(id string, n int) (count int, oldest int64, err error)
	// putNext writes the next version of id, one past its latest, in a
	// commit of its own, and returns that version.
	putNext(id string, value []byte) (int64, error)
	close() error
}

type record struct {
	id      string
	version int64
	value   []byte
}

type versionsResult struct {
	table *table
}

const (
	sysTipkv  = "tipkv"
	sysBadger = "Badger"
	sysPebble = "Pebble asc"
	sysGoque  = "goque"
	sysNaive  = "naive Pebble"

	sysDque     = "dque"
	sysBigqueue = "bigqueue"
	sysNATS     = "NATS KV"
)

func docID(i int) string  { return fmt.Sprintf("doc-%08d", i) }
func longID(i int) string { return fmt.Sprintf("long-%06d", i) }

// seqLen is the length of the random sequences reads walk through; a row
// wraps around it.
const seqLen = 1 << 16

// versionData is the data set every system holds, and each system's own
// random sequences of reads and writes.
type versionData struct {
	docs, longs []string
	seqs        []*versionSeqs // per system, in the section's order
}

// versionSeqs are one system's random sequences. Every system gets its
// own, drawn alike from its own seed, so that no system reads what
// another has just read and no row depends on one lucky sequence.
type versionSeqs struct {
	hotDocs  []int // indexes into docs: a permutation of the hot set, then random picks from it
	uniDocs  []int
	hotLongs []int
	uniLongs []int
	asOf     []int64
	puts     []int // documents the put rows write to, uniform
}

func newVersionData(cfg config, systems int) *versionData {
	d := &versionData{docs: make([]string, cfg.Docs), longs: make([]string, cfg.LongDocs)}
	for i := range d.docs {
		d.docs[i] = docID(i)
	}
	for i := range d.longs {
		d.longs[i] = longID(i)
	}
	for k := range systems {
		d.seqs = append(d.seqs, newVersionSeqs(cfg, k))
	}
	return d
}

func newVersionSeqs(cfg config, k int) *versionSeqs {
	rng := rand.New(rand.NewPCG(cfg.Seed, 100+uint64(k)))
	s := &versionSeqs{
		hotDocs:  hotSequence(rng, cfg.Docs, cfg.HotDocs),
		uniDocs:  uniformSequence(rng, cfg.Docs),
		hotLongs: hotSequence(rng, cfg.LongDocs, cfg.HotLong),
		uniLongs: uniformSequence(rng, cfg.LongDocs),
		puts:     uniformSequence(rng, cfg.Docs),
	}
	s.asOf = make([]int64, seqLen)
	for i := range s.asOf {
		s.asOf[i] = 1 + rng.Int64N(int64(cfg.Versions))
	}
	return s
}

// hotSequence picks hot of n items at random and returns them once each,
// in random order (for warming the cache up), then random picks among them.
func hotSequence(rng *rand.Rand, n, hot int) []int {
	set := rng.Perm(n)[:hot]
	out := make([]int, 0, max(seqLen, hot))
	out = append(out, set...)
	for len(out) < cap(out) {
		out = append(out, set[rng.IntN(hot)])
	}
	return out
}

func uniformSequence(rng *rand.Rand, n int) []int {
	out := make([]int, seqLen)
	for i := range out {
		out[i] = rng.IntN(n)
	}
	return out
}

// A batchSpec is one write batch of the load: every version of ids.
type batchSpec struct {
	ids      []string
	versions int
}

// batches cuts the data set into the load's write batches: whole
// documents, in id order, about cfg.LoadBatch versions each.
func (d *versionData) batches(cfg config) []batchSpec {
	var out []batchSpec
	add := func(ids []string, versions int) {
		per := max(cfg.LoadBatch/versions, 1)
		for lo := 0; lo < len(ids); lo += per {
			out = append(out, batchSpec{ids: ids[lo:min(lo+per, len(ids))], versions: versions})
		}
	}
	add(d.docs, cfg.Versions)
	add(d.longs, cfg.LongVersions)
	return out
}

// records returns the batch's records, values from gen.
func (b batchSpec) records(gen *valueGen) []record {
	vals := gen.next(len(b.ids) * b.versions)
	out := make([]record, 0, len(vals))
	for _, id := range b.ids {
		for v := 1; v <= b.versions; v++ {
			out = append(out, record{id: id, version: int64(v), value: vals[len(out)]})
		}
	}
	return out
}

// loadSide returns a system's side of a load row: chunk c writes the
// batches c*per to (c+1)*per, with values that depend only on c, so every
// system writes the same bytes.
func loadSide[B any](cfg config, name string, batches []B, per int, records func(B, *valueGen) []record, put func([]record) error) side {
	c := 0
	return side{system: name, chunk: func() (float64, error) {
		gen := newValueGen(cfg.Seed+uint64(c)<<8, cfg.ValueSize)
		var recs [][]record
		for _, b := range batches[c*per : min((c+1)*per, len(batches))] {
			recs = append(recs, records(b, gen))
		}
		c++
		return timeChunk(func() (int, error) {
			n := 0
			for _, r := range recs {
				if err := put(r); err != nil {
					return n, err
				}
				n += len(r)
			}
			return n, nil
		}, cfg.writeQuiet(name), false)
	}}
}

func runVersions(cfg config, parent string) (*versionsResult, error) {
	openers := []struct {
		name string
		open func(dir string) (versionStore, error)
	}{
		{sysTipkv, func(dir string) (versionStore, error) { return openTipkvVersions(dir, cfg, false) }},
		{sysBadger, func(dir string) (versionStore, error) { return openBadgerVersions(dir, cfg, false) }},
		{sysPebble, func(dir string) (versionStore, error) { return openPebbleVersions(dir, cfg, false) }},
	}
	data := newVersionData(cfg, len(openers))
	t := &table{title: fmt.Sprintf("Document versions: %s documents x %d versions (+ %s x %d for newest 100), %d-byte values",
		thousands(cfg.Docs), cfg.Versions, thousands(cfg.LongDocs), cfg.LongVersions, cfg.ValueSize)}
	type opened struct {
		name  string
		dir   string
		store versionStore
		seqs  *versionSeqs
	}
	var stores []opened
	defer func() {
		for _, o := range stores {
			_ = o.store.close()
		}
	}()
	for k, o := range openers {
		t.systems = append(t.systems, o.name)
		dir := filepath.Join(parent, "versions-"+slug(o.name))
		s, err := o.open(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: open: %w", o.name, err)
		}
		stores = append(stores, opened{o.name, dir, s, data.seqs[k]})
	}

	// The load, paired: every round writes the next chunk of batches into
	// each store in turn.
	batches := data.batches(cfg)
	per := cfg.loadPer(len(batches))
	var sides []side
	for _, o := range stores {
		sides = append(sides, loadSide(cfg, o.name, batches, per, batchSpec.records, o.store.put))
	}
	progress("versions: loading %d batches into each store, %d per round", len(batches), per)
	load, err := runPaired(sides, fixedPlan((len(batches)+per-1)/per))
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	disk := map[string]float64{}
	for _, o := range stores {
		t0 := time.Now()
		if err := o.store.settle(); err != nil {
			return nil, fmt.Errorf("%s: settle: %w", o.name, err)
		}
		settleDown(cfg.Quiet)
		size, err := dirSize(o.dir)
		if err != nil {
			return nil, err
		}
		disk[o.name] = float64(size)
		progress("versions: %s compacted in %s, %.0f MiB on disk", o.name, time.Since(t0).Round(time.Millisecond), float64(size)/(1<<20))
	}

	type readOp struct {
		op   string
		long bool // reads the long documents (newest 100)
		run  func(s versionStore, q *versionSeqs, id string, i int) error
	}
	nv := int64(cfg.Versions)
	nl := int64(cfg.LongVersions)
	missing := func(id string) string { return id + "~" } // sorts between two documents
	ops := []readOp{
		{"latest", false, func(s versionStore, _ *versionSeqs, id string, _ int) error {
			v, err := s.latest(id)
			return check(err, v == nv, "latest of %s = %d, want %d", id, v, nv)
		}},
		{"as-of", false, func(s versionStore, q *versionSeqs, id string, i int) error {
			want := q.asOf[i%seqLen]
			v, err := s.asOf(id, want)
			return check(err, v == want, "as-of %d of %s = %d", want, id, v)
		}},
		{"newest 10", false, func(s versionStore, _ *versionSeqs, id string, _ int) error {
			n, oldest, err := s.newest(id, 10)
			want := min(10, int(nv))
			return check(err, n == want && oldest == nv-int64(want)+1, "newest 10 of %s: %d versions down to %d", id, n, oldest)
		}},
		{"newest 100", true, func(s versionStore, _ *versionSeqs, id string, _ int) error {
			n, oldest, err := s.newest(id, 100)
			want := min(100, int(nl))
			return check(err, n == want && oldest == nl-int64(want)+1, "newest 100 of %s: %d versions down to %d", id, n, oldest)
		}},
		{"missing document", false, func(s versionStore, _ *versionSeqs, id string, _ int) error {
			v, err := s.latest(missing(id))
			if errors.Is(err, errMissing) {
				return nil
			}
			return fmt.Errorf("latest of missing %s: version %d, error %v", missing(id), v, err)
		}},
	}
	for _, group := range []string{"hot", "uniform"} {
		for _, op := range ops {
			var sides []side
			for _, o := range stores {
				s, q := o.store, o.seqs
				seq, names, warm := q.uniDocs, data.docs, 1000
				switch {
				case op.long && group == "hot":
					seq, names, warm = q.hotLongs, data.longs, cfg.HotLong
				case op.long:
					seq, names = q.uniLongs, data.longs
				case group == "hot":
					seq, warm = q.hotDocs, cfg.HotDocs
				}
				read := func(i int) error { return op.run(s, q, names[seq[i%len(seq)]], i) }
				pos := 0
				for range warm {
					if err := read(pos); err != nil {
						return nil, fmt.Errorf("%s, %s: %s: %w", op.op, group, o.name, err)
					}
					pos++
				}
				sides = append(sides, side{system: o.name, chunk: func() (float64, error) {
					return timeChunk(forDuration(read, &pos, cfg.Chunk), cfg.ReadQuiet, false)
				}})
			}
			progress("versions: %s, %s", op.op, group)
			res, err := runPaired(sides, cfg.plan())
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", op.op, group, err)
			}
			t.addPaired(group, op.op, "ns/op", res, false)
			for _, o := range stores {
				if s, ok := o.store.(interface{ cacheStats() string }); ok {
					progress("versions: %s: %s", o.name, s.cacheStats())
				}
			}
		}
	}
	t.addPaired("", fmt.Sprintf("load (batches of %s versions)", thousands(cfg.LoadBatch)), "ns/item", load, false)

	// One version per commit, to random documents: after the reads, which
	// expect every document at version Versions.
	sides = nil
	for k, o := range stores {
		sides = append(sides, putSide(cfg, o.name, o.store, data.docs, o.seqs.puts, nv, uint64(k), cfg.PutChunk, cfg.writeQuiet(o.name), false))
	}
	progress("versions: put, 1 per commit")
	put, err := runPaired(sides, cfg.writePlan())
	if err != nil {
		return nil, fmt.Errorf("put: %w", err)
	}
	t.addPaired("", "put, 1 version per commit (random documents)", "ns/op", put, false)
	t.addSingle("", "disk size after compaction", "bytes", disk)

	synced, err := syncedPuts(cfg, parent)
	if err != nil {
		return nil, fmt.Errorf("synced puts: %w", err)
	}
	t.addPaired("", "put, 1 version per commit, synced", "ns/op", synced, true)

	t.notes = append(t.notes, fmt.Sprintf(
		"hot: %s documents (%d for newest 100) per system that fit the %d MiB block cache, read once first; uniform: all documents. "+
			"Every system reads its own random sequence. Values are raw bytes (tipkv codec.Raw). %s",
		thousands(cfg.HotDocs), cfg.HotLong, cfg.CacheSize>>20, cfg.method()))
	return &versionsResult{table: t}, nil
}

// putSide returns a system's side of a put row: each chunk writes n new
// versions, one per commit, to the documents of seq, which all start at
// version start, and checks the version each one got.
func putSide(cfg config, name string, s versionStore, docs []string, seq []int, start int64, seed uint64, n int, quiet time.Duration, wall bool) side {
	gen := newValueGen(cfg.Seed+1000+seed, cfg.ValueSize)
	latest := map[int]int64{}
	pos := 0
	return side{system: name, chunk: func() (float64, error) {
		vals := gen.next(n)
		return timeChunk(func() (int, error) {
			for i := range n {
				d := seq[pos%len(seq)]
				pos++
				want := latest[d] + 1
				if want == 1 {
					want = start + 1
				}
				v, err := s.putNext(docs[d], vals[i])
				if err := check(err, v == want, "put %s: version %d, want %d", docs[d], v, want); err != nil {
					return i, err
				}
				latest[d] = v
			}
			return n, nil
		}, quiet, wall)
	}}
}

// syncedPuts measures one synced version per commit in a new, small store
// per system: tipkv by default (Options.NoSync false), Badger with
// SyncWrites, raw Pebble with pebble.Sync. The time is wall time: what a
// synced commit waits for is the disk, which CPU time does not count.
func syncedPuts(cfg config, parent string) (*paired, error) {
	openers := []struct {
		name string
		open func(dir string) (versionStore, error)
	}{
		{sysTipkv, func(dir string) (versionStore, error) { return openTipkvVersions(dir, cfg, true) }},
		{sysBadger, func(dir string) (versionStore, error) { return openBadgerVersions(dir, cfg, true) }},
		{sysPebble, func(dir string) (versionStore, error) { return openPebbleVersions(dir, cfg, true) }},
	}
	docs := make([]string, cfg.SyncDocs)
	var recs []record
	gen := newValueGen(cfg.Seed+3, cfg.ValueSize)
	vals := gen.next(cfg.SyncDocs)
	for i := range docs {
		docs[i] = docID(i)
		recs = append(recs, record{id: docs[i], version: 1, value: vals[i]})
	}
	var sides []side
	for k, o := range openers {
		s, err := o.open(filepath.Join(parent, "synced-"+slug(o.name)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		defer s.close()
		if err := s.put(recs); err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		rng := rand.New(rand.NewPCG(cfg.Seed, 200+uint64(k)))
		sides = append(sides, putSide(cfg, o.name, s, docs, uniformSequence(rng, len(docs)), 1, 2000+uint64(k), cfg.SyncChunk, 0, true))
	}
	settleDown(cfg.Quiet)
	progress("versions: put, 1 per commit, synced")
	return runPaired(sides, cfg.writePlan())
}

// check returns err, or an error made of format and args when ok is false.
func check(err error, ok bool, format string, args ...any) error {
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("wrong result: "+format, args...)
	}
	return nil
}
