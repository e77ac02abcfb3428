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
)

func docID(i int) string  { return fmt.Sprintf("doc-%08d", i) }
func longID(i int) string { return fmt.Sprintf("long-%06d", i) }

// seqLen is the length of the random sequences reads walk through; a row
// wraps around it.
const seqLen = 1 << 16

// versionData is the data set and the random read sequences every system
// shares.
type versionData struct {
	docs, longs []string
	hotDocs     []int // indexes into docs: a permutation of the hot set, then random picks from it
	uniDocs     []int
	hotLongs    []int
	uniLongs    []int
	asOf        []int64
}

func newVersionData(cfg config) *versionData {
	d := &versionData{docs: make([]string, cfg.Docs), longs: make([]string, cfg.LongDocs)}
	for i := range d.docs {
		d.docs[i] = docID(i)
	}
	for i := range d.longs {
		d.longs[i] = longID(i)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	d.hotDocs = hotSequence(rng, cfg.Docs, cfg.HotDocs)
	d.uniDocs = uniformSequence(rng, cfg.Docs)
	d.hotLongs = hotSequence(rng, cfg.LongDocs, cfg.HotLong)
	d.uniLongs = uniformSequence(rng, cfg.LongDocs)
	d.asOf = make([]int64, seqLen)
	for i := range d.asOf {
		d.asOf[i] = 1 + rng.Int64N(int64(cfg.Versions))
	}
	return d
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

// load writes the data set into s: the documents in id order, each with
// all its versions, in batches of about 10,000 versions. It returns the
// time per version.
func (d *versionData) load(cfg config, s versionStore) (float64, error) {
	gen := newValueGen(cfg.Seed, cfg.ValueSize)
	c0 := clock()
	n := 0
	var recs []record
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		vals := gen.next(len(recs))
		for i := range recs {
			recs[i].value = vals[i]
		}
		n += len(recs)
		err := s.put(recs)
		recs = recs[:0]
		return err
	}
	add := func(ids []string, versions int) error {
		for _, id := range ids {
			for v := 1; v <= versions; v++ {
				recs = append(recs, record{id: id, version: int64(v)})
			}
			if len(recs) >= 10_000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	}
	if err := add(d.docs, cfg.Versions); err != nil {
		return 0, err
	}
	if err := add(d.longs, cfg.LongVersions); err != nil {
		return 0, err
	}
	return elapsed(c0, n), nil
}

func runVersions(cfg config, parent string) (*versionsResult, error) {
	data := newVersionData(cfg)
	type opened struct {
		name  string
		dir   string
		store versionStore
	}
	openers := []struct {
		name string
		open func(dir string) (versionStore, error)
	}{
		{sysTipkv, func(dir string) (versionStore, error) { return openTipkvVersions(dir, cfg) }},
		{sysBadger, func(dir string) (versionStore, error) { return openBadgerVersions(dir, cfg) }},
		{sysPebble, func(dir string) (versionStore, error) { return openPebbleVersions(dir, cfg) }},
	}
	t := &table{title: fmt.Sprintf("Document versions: %s documents x %d versions (+ %s x %d for newest 100), %d-byte values",
		thousands(cfg.Docs), cfg.Versions, thousands(cfg.LongDocs), cfg.LongVersions, cfg.ValueSize)}
	loadNs := map[string]float64{}
	disk := map[string]float64{}
	var stores []opened
	defer func() {
		for _, o := range stores {
			_ = o.store.close()
		}
	}()
	for _, o := range openers {
		t.systems = append(t.systems, o.name)
		dir := filepath.Join(parent, "versions-"+slug(o.name))
		s, err := o.open(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: open: %w", o.name, err)
		}
		stores = append(stores, opened{o.name, dir, s})
		progress("versions: loading %s", o.name)
		ns, err := data.load(cfg, s)
		if err != nil {
			return nil, fmt.Errorf("%s: load: %w", o.name, err)
		}
		loadNs[o.name] = ns
		t0 := time.Now()
		if err := s.settle(); err != nil {
			return nil, fmt.Errorf("%s: settle: %w", o.name, err)
		}
		settleDown(cfg.Quiet)
		size, err := dirSize(dir)
		if err != nil {
			return nil, err
		}
		disk[o.name] = float64(size)
		progress("versions: %s loaded (%.2f µs/version), compacted in %s, %.0f MiB on disk",
			o.name, ns/1e3, time.Since(t0).Round(time.Millisecond), float64(size)/(1<<20))
	}

	type readOp struct {
		op    string
		hot   []int
		uni   []int
		warm  int
		names []string // the ids the sequences index
		run   func(s versionStore, id string, i int) error
	}
	nv := int64(cfg.Versions)
	nl := int64(cfg.LongVersions)
	missing := func(id string) string { return id + "~" } // sorts between two documents
	ops := []readOp{
		{"latest", data.hotDocs, data.uniDocs, cfg.HotDocs, data.docs, func(s versionStore, id string, _ int) error {
			v, err := s.latest(id)
			return check(err, v == nv, "latest of %s = %d, want %d", id, v, nv)
		}},
		{"as-of", data.hotDocs, data.uniDocs, cfg.HotDocs, data.docs, func(s versionStore, id string, i int) error {
			want := data.asOf[i%seqLen]
			v, err := s.asOf(id, want)
			return check(err, v == want, "as-of %d of %s = %d", want, id, v)
		}},
		{"newest 10", data.hotDocs, data.uniDocs, cfg.HotDocs, data.docs, func(s versionStore, id string, _ int) error {
			n, oldest, err := s.newest(id, 10)
			want := min(10, int(nv))
			return check(err, n == want && oldest == nv-int64(want)+1, "newest 10 of %s: %d versions down to %d", id, n, oldest)
		}},
		{"newest 100", data.hotLongs, data.uniLongs, cfg.HotLong, data.longs, func(s versionStore, id string, _ int) error {
			n, oldest, err := s.newest(id, 100)
			want := min(100, int(nl))
			return check(err, n == want && oldest == nl-int64(want)+1, "newest 100 of %s: %d versions down to %d", id, n, oldest)
		}},
		{"missing document", data.hotDocs, data.uniDocs, cfg.HotDocs, data.docs, func(s versionStore, id string, _ int) error {
			v, err := s.latest(missing(id))
			if errors.Is(err, errMissing) {
				return nil
			}
			return fmt.Errorf("latest of missing %s: version %d, error %v", missing(id), v, err)
		}},
	}
	for _, group := range []string{"hot", "uniform"} {
		for _, op := range ops {
			seq, warm := op.uni, 1000
			if group == "hot" {
				seq, warm = op.hot, op.warm
			}
			var cs []*contender
			for _, o := range stores {
				s := o.store
				cs = append(cs, &contender{system: o.name, op: func(i int) error {
					return op.run(s, op.names[seq[i%len(seq)]], i)
				}})
			}
			progress("versions: %s, %s", op.op, group)
			res, err := measure(cs, warm, cfg.Rounds, cfg.Cell)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", op.op, group, err)
			}
			t.add(group, op.op, "ns/op", res)
			for _, o := range stores {
				if s, ok := o.store.(interface{ cacheStats() string }); ok {
					progress("versions: %s: %s", o.name, s.cacheStats())
				}
			}
		}
	}
	t.add("", "load (batches of 10,000 versions)", "ns/item", loadNs)
	t.add("", "disk size after compaction", "bytes", disk)
	t.notes = append(t.notes, fmt.Sprintf(
		"hot: %s documents (%d for newest 100) that fit the %d MiB block cache, warmed first; uniform: all documents. "+
			"Each cell is the median of %d interleaved runs of %s. Values are raw bytes (tipkv codec.Raw).",
		thousands(cfg.HotDocs), cfg.HotLong, cfg.CacheSize>>20, cfg.Rounds, cfg.Cell))
	return &versionsResult{table: t}, nil
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
