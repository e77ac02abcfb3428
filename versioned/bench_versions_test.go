package versioned_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/versioned"
)

// Benchmarks of versioned/ against raw Pebble, each beside its baseline in
// the same run. The data set is on disk, flushed and compacted, built once
// per process in the top benchmark's temporary directory:
//
//   - 100,000 documents x 10 versions and 1,000 "deep" documents x 200
//     versions (for History of 100), 100-byte random values, in a tipkv
//     store;
//   - a copy of the same files opened with raw Pebble (same comparer,
//     cache size, memtable size and bloom filters): identical tables;
//   - the same documents in an ascending layout (asc(version)) in another
//     raw Pebble store, read newest first with reverse iteration.
//
// Values go through codec.Raw (a copy), and every baseline copies the value
// and decodes the version from the key too, so ratios show tipkv's own
// overhead.
//
// A "pair=" benchmark runs tipkv and its baseline in alternating chunks of
// operations, so that both see the same machine load, and reports
// "ratio": tipkv's time over the baseline's (below 1: tipkv is faster), or
// for writes the baseline's over tipkv's (throughput), with each side's
// ns/op. An "impl=" benchmark runs one side alone, for its allocations.
// Run (about a minute per count on 2 cores):
//
//	go test -run '^$' -bench 'BenchmarkVersions' -count 6 ./versioned/ | tee versions.txt
//	benchstat versions.txt

const (
	vbDocs      = 100_000
	vbVersions  = 10
	vbDeepDocs  = 1_000
	vbDeepVers  = 200
	vbValueSize = 100
	vbColl      = "bench"
)

// vbData is the read-only data set shared by the benchmarks of one run.
type vbData struct {
	pristine string // the closed tipkv store, cloned for write benchmarks
	db       *tipkv.DB
	docs     *versioned.Collection[[]byte]
	raw      *pebble.DB // a clone of pristine, opened with raw Pebble
	asc      *pebble.DB // ascending layout
	ids      []string   // main documents
	deep     []string   // deep documents
}

func vbID(i int) string     { return fmt.Sprintf("doc-%06d", i) }
func vbDeepID(i int) string { return fmt.Sprintf("deep-%04d", i) }

// vbPrefix is 01 | bench | id.
func vbPrefix(id string) []byte {
	return codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), vbColl), id)
}

func vbValue(rng *rand.Rand) []byte {
	v := make([]byte, vbValueSize)
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	return v
}

// The write benchmarks give both sides a 64 MiB memtable (and a cache four
// times that), so that a run's writes fit in it: otherwise each flush of
// random documents overlaps the whole compacted data set, and the
// compaction stalls that follow land on either side at random (ratios
// from 0.2 to 4.5 in one run on this machine).
const (
	vbWriteMemTable = 64 << 20
	vbWriteCache    = 256 << 20
)

// vbPebbleOptions configures raw Pebble as pebblestore.Open configures it
// (comparer, cache, memtable, bloom filters, format, values kept in place).
func vbPebbleOptions(cacheSize int64, memTable uint64) *pebble.Options {
	cache := pebble.NewCache(cacheSize)
	opts := &pebble.Options{
		Comparer:           pebblestore.Comparer,
		Cache:              cache,
		MemTableSize:       memTable,
		FormatMajorVersion: pebblestore.FormatMajorVersion,
		Logger:             vbQuiet{},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	opts.Experimental.SpanPolicyFunc = func([]byte) (pebble.SpanPolicy, []byte, error) {
		return pebble.SpanPolicy{DisableValueSeparationBySuffix: true}, nil, nil
	}
	return opts
}

func vbOpenPebble(b testing.TB, dir string) *pebble.DB {
	return vbOpenPebbleSized(b, dir, 128<<20, 16<<20)
}

func vbOpenPebbleSized(b testing.TB, dir string, cacheSize int64, memTable uint64) *pebble.DB {
	b.Helper()
	opts := vbPebbleOptions(cacheSize, memTable)
	defer opts.Cache.Unref()
	db, err := pebble.Open(dir, opts)
	require.NoError(b, err)
	return db
}

type vbQuiet struct{}

func (vbQuiet) Infof(string, ...any)         {}
func (vbQuiet) Errorf(f string, args ...any) { pebble.DefaultLogger.Errorf(f, args...) }
func (vbQuiet) Fatalf(f string, args ...any) { pebble.DefaultLogger.Fatalf(f, args...) }

// vbEach calls f for every key of the data set in key order, newest
// version first within each document.
func vbEach(f func(prefix []byte, v int64, value []byte)) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range vbDeepDocs {
		p := vbPrefix(vbDeepID(i))
		for v := int64(vbDeepVers); v >= 1; v-- {
			f(p, v, vbValue(rng))
		}
	}
	for i := range vbDocs {
		p := vbPrefix(vbID(i))
		for v := int64(vbVersions); v >= 1; v-- {
			f(p, v, vbValue(rng))
		}
	}
}

// vbBuild writes the data set. It runs once per benchmark process.
func vbBuild(b *testing.B, root string) *vbData {
	d := &vbData{pristine: filepath.Join(root, "tipkv")}
	for i := range vbDocs {
		d.ids = append(d.ids, vbID(i))
	}
	for i := range vbDeepDocs {
		d.deep = append(d.deep, vbDeepID(i))
	}

	// The tipkv store, written through the storage seam with the key
	// layout versioned/ writes (as Put would, without its read per write).
	db, err := tipkv.Open(d.pristine, &tipkv.Options{NoSync: true})
	require.NoError(b, err)
	s, err := link.StoreOf(db)
	require.NoError(b, err)
	batch := s.NewBatch()
	vbEach(func(prefix []byte, v int64, value []byte) {
		require.NoError(b, batch.Set(codec.AppendDesc(bytes.Clone(prefix), v), value))
		if batch.Size() > 4<<20 {
			require.NoError(b, batch.Apply(false))
			require.NoError(b, batch.Close())
			batch = s.NewBatch()
		}
	})
	require.NoError(b, batch.Apply(false))
	require.NoError(b, batch.Close())
	require.NoError(b, db.Flush())
	require.NoError(b, db.Compact())
	require.NoError(b, db.Close())

	// The ascending layout.
	asc := vbOpenPebble(b, filepath.Join(root, "asc"))
	pb := asc.NewBatch()
	vbEach(func(prefix []byte, v int64, value []byte) {
		require.NoError(b, pb.Set(codec.AppendAsc(bytes.Clone(prefix), v), value, nil))
		if pb.Len() > 4<<20 {
			require.NoError(b, pb.Commit(pebble.NoSync))
			pb = asc.NewBatch()
		}
	})
	require.NoError(b, pb.Commit(pebble.NoSync))
	require.NoError(b, asc.Flush())
	require.NoError(b, asc.Compact(b.Context(), []byte{0}, []byte{0xff}, true))
	d.asc = asc

	d.db, d.docs = vbOpenTipkv(b, vbClone(b, d.pristine, filepath.Join(root, "read")), nil)
	d.raw = vbOpenPebble(b, vbClone(b, d.pristine, filepath.Join(root, "raw")))
	return d
}

func vbOpenTipkv(b testing.TB, dir string, opts *tipkv.Options) (*tipkv.DB, *versioned.Collection[[]byte]) {
	b.Helper()
	db, err := tipkv.Open(dir, opts)
	require.NoError(b, err)
	docs, err := versioned.NewCollection[[]byte](db, vbColl, &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(b, err)
	return db, docs
}

// vbClone copies the closed store in src to dst, hard-linking the tables
// (immutable) and copying the rest, and returns dst.
func vbClone(b testing.TB, src, dst string) string {
	b.Helper()
	require.NoError(b, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(b, err)
	for _, e := range entries {
		name := e.Name()
		if name == "LOCK" || e.IsDir() {
			continue
		}
		from, to := filepath.Join(src, name), filepath.Join(dst, name)
		if strings.HasSuffix(name, ".sst") && os.Link(from, to) == nil {
			continue
		}
		in, err := os.Open(from)
		require.NoError(b, err)
		out, err := os.Create(to)
		require.NoError(b, err)
		_, err = io.Copy(out, in)
		require.NoError(b, err)
		require.NoError(b, in.Close())
		require.NoError(b, out.Close())
	}
	return dst
}

func BenchmarkVersions(b *testing.B) {
	root := b.TempDir()
	var once sync.Once
	var d *vbData
	data := func(b *testing.B) *vbData {
		once.Do(func() { d = vbBuild(b, root) })
		return d
	}
	b.Cleanup(func() {
		if d != nil {
			_ = d.db.Close()
			_ = d.raw.Close()
			_ = d.asc.Close()
		}
	})

	b.Run("op=latest/impl=raw-get", func(b *testing.B) { vbSolo(b, vbRawGetOp(b, data(b))) })
	b.Run("op=latest/impl=tipkv", func(b *testing.B) { vbSolo(b, vbLatestOp(b, data(b), false)) })
	b.Run("op=latest/pair=raw-get", func(b *testing.B) {
		d := data(b)
		vbPair(b, 64, false, vbRawGetOp(b, d), vbLatestOp(b, d, false))
	})
	// Latest of hot documents whose latest version the DB's version cache
	// knows (it wrote or pruned them since it opened): a point Get of the
	// known key, against raw Pebble's Get of the same key in a clone of
	// the same tables.
	b.Run("op=latest-known/pair=raw-get", func(b *testing.B) {
		d := data(b)
		vbPair(b, 64, false, vbHotGetOp(b, d), vbLatestKnownOp(b, d))
	})
	// The same Get through the storage seam of tipkv's DB: how much of
	// the pair above is the engine's, before versioned adds anything.
	b.Run("op=store-get/pair=raw-get", func(b *testing.B) {
		d := data(b)
		vbPair(b, 64, false, vbHotGetOp(b, d), vbStoreGetOp(b, d))
	})
	b.Run("op=latest/pair=raw-seek", func(b *testing.B) {
		d := data(b)
		vbPair(b, 64, false, vbRawSeekOp(b, d), vbLatestOp(b, d, false))
	})
	b.Run("op=raw-seek/pair=raw-get", func(b *testing.B) {
		d := data(b)
		vbPair(b, 64, false, vbRawGetOp(b, d), vbRawSeekOp(b, d))
	})
	b.Run("op=asof/pair=latest", func(b *testing.B) {
		d := data(b)
		vbPair(b, 64, false, vbLatestOp(b, d, false), vbAsOfOp(b, d))
	})
	b.Run("op=latest-missing/pair=present", func(b *testing.B) {
		d := data(b)
		hits0, _ := vbFilterStats(b, d.db)
		vbPair(b, 64, false, vbLatestOp(b, d, false), vbLatestOp(b, d, true))
		hits1, _ := vbFilterStats(b, d.db)
		b.ReportMetric(float64(hits1-hits0)/float64(b.N), "filter-hits/miss")
	})
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("op=history-%d/impl=tipkv", n), func(b *testing.B) { vbSolo(b, vbHistoryOp(b, data(b), n)) })
		b.Run(fmt.Sprintf("op=history-%d/pair=raw-forward", n), func(b *testing.B) {
			d := data(b)
			vbPair(b, 32, false, vbRawScanOp(b, d, n, false), vbHistoryOp(b, d, n))
		})
		b.Run(fmt.Sprintf("op=history-%d/pair=asc-reverse", n), func(b *testing.B) {
			d := data(b)
			vbPair(b, 32, false, vbRawScanOp(b, d, n, true), vbHistoryOp(b, d, n))
		})
	}
	for _, v := range []int{vbVersions, vbDeepVers} {
		b.Run(fmt.Sprintf("op=latest-all/versions=%d/impl=tipkv", v), func(b *testing.B) {
			vbSolo(b, vbLatestAllOp(b, data(b), v))
			b.ReportMetric(vbNs(b)/1000, "ns/doc")
		})
	}
	b.Run(fmt.Sprintf("op=latest-all/versions=%d/pair=raw-scan", vbDeepVers), func(b *testing.B) {
		d := data(b)
		vbPair(b, 2, false, vbRawScanAllOp(b, d), vbLatestAllOp(b, d, vbDeepVers))
	})
	b.Run("op=put/impl=tipkv", func(b *testing.B) { vbSolo(b, vbPutOp(b, data(b), vbDocs)) })
	b.Run("op=put/pair=raw-get-set", func(b *testing.B) {
		d := data(b)
		vbPair(b, 64, true, vbRawPutOp(b, d, vbDocs, true), vbPutOp(b, d, vbDocs))
	})
	b.Run("op=put-hot/pair=raw-set", func(b *testing.B) {
		d := data(b)
		vbPair(b, 64, true, vbRawPutOp(b, d, 1000, false), vbPutOp(b, d, 1000))
	})
	// Last: once built, the miss filter (versioned.Options.MissFilter) is
	// the DB's, used by every handle of the collection.
	var filtered *versioned.Collection[[]byte]
	var built time.Duration
	filter := func(b *testing.B, d *vbData) *versioned.Collection[[]byte] {
		if filtered == nil {
			start := time.Now()
			c, err := versioned.NewCollection(d.db, vbColl, &versioned.Options[[]byte]{Codec: codec.Raw{}, MissFilter: true})
			require.NoError(b, err)
			built, filtered = time.Since(start), c
		}
		return filtered
	}
	// Latest of a missing document with the miss filter, against raw
	// Pebble's Get of a missing key (its bloom filter answers) and
	// against Latest of a present document.
	b.Run("op=latest-missing-filtered/pair=raw-get-missing", func(b *testing.B) {
		d := data(b)
		c := filter(b, d)
		vbPair(b, 64, false, vbRawGetMissingOp(b, d), vbLatestMissingOp(b, d, c))
		b.ReportMetric(float64(built.Nanoseconds())/float64(vbDocs+vbDeepDocs), "build-ns/doc")
	})
	b.Run("op=latest-missing-filtered/pair=present", func(b *testing.B) {
		d := data(b)
		c := filter(b, d)
		vbPair(b, 64, false, vbLatestOp(b, d, false), vbLatestMissingOp(b, d, c))
	})
}

// vbStoreGetOp is vbHotGetOp through tipkv's storage seam on tipkv's DB:
// engine.GetAppend into a reused buffer, then the codec's copy.
func vbStoreGetOp(b *testing.B, d *vbData) func(int) {
	s, err := link.StoreOf(d.db)
	require.NoError(b, err)
	ids := vbHotIDs(d)
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = codec.AppendDesc(vbPrefix(id), vbVersions)
	}
	var buf, out []byte
	return func(i int) {
		k := keys[i%len(keys)]
		var err error
		buf, err = engine.GetAppend(s, buf[:0], k)
		if err != nil {
			b.Fatal(err)
		}
		_ = codec.Raw{}.Decode(buf, &out)
		if len(out) != vbValueSize {
			b.Fatalf("got %d bytes", len(out))
		}
	}
}

// vbRawGetMissingOp is raw Pebble's Get of the latest version's key of a
// missing document (ids that sort among the present ones).
func vbRawGetMissingOp(b *testing.B, d *vbData) func(int) {
	picks := vbPicks(vbPicksN, vbDocs)
	keys := make([][]byte, len(picks))
	for i, p := range picks {
		keys[i] = codec.AppendDesc(vbPrefix(d.ids[p]+"-missing"), vbVersions)
	}
	return func(i int) {
		if _, _, err := d.raw.Get(keys[i%len(keys)]); err != pebble.ErrNotFound {
			b.Fatal("found a missing document", err)
		}
	}
}

// vbLatestMissingOp is Latest of missing documents through c.
func vbLatestMissingOp(b *testing.B, d *vbData, c *versioned.Collection[[]byte]) func(int) {
	picks := vbPicks(vbPicksN, vbDocs)
	ids := make([]string, len(picks))
	for i, p := range picks {
		ids[i] = d.ids[p] + "-missing"
	}
	return func(i int) {
		if _, err := c.Latest(ids[i%len(ids)]); err == nil {
			b.Fatal("found a missing document")
		}
	}
}

func vbNs(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }

// vbSolo runs op b.N times.
func vbSolo(b *testing.B, op func(i int)) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		op(i)
	}
}

// vbPair runs b.N operations of each side in alternating chunks, first one
// side first, then the other, and reports the ratio of their times:
// ours/base, or base/ours for throughput. The sides take their random
// picks half a cycle apart, so that when they share a store one does not
// warm the cache for the other.
func vbPair(b *testing.B, chunk int, throughput bool, base, ours func(i int)) {
	var tBase, tOurs time.Duration
	run := func(op func(int), i, n int) time.Duration {
		start := time.Now()
		for j := i; j < i+n; j++ {
			op(j)
		}
		return time.Since(start)
	}
	shifted := func(j int) { ours(j + vbPicksN/2) }
	b.ResetTimer()
	for i, k := 0, 0; i < b.N; i, k = i+chunk, k+1 {
		n := min(chunk, b.N-i)
		if k%2 == 0 {
			tBase += run(base, i, n)
			tOurs += run(shifted, i, n)
		} else {
			tOurs += run(shifted, i, n)
			tBase += run(base, i, n)
		}
	}
	b.StopTimer()
	r := float64(tOurs) / float64(tBase)
	if throughput {
		r = 1 / r
	}
	b.ReportMetric(r, "ratio")
	b.ReportMetric(float64(tBase.Nanoseconds())/float64(b.N), "base-ns/op")
	b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "tipkv-ns/op")
}

func vbFilterStats(b testing.TB, db *tipkv.DB) (hits, misses int64) {
	s, err := link.StoreOf(db)
	require.NoError(b, err)
	fs, ok := s.(interface{ FilterStats() (int64, int64) })
	require.True(b, ok)
	return fs.FilterStats()
}

// vbPicks returns n random indexes below max, the same for every
// benchmark of the run.
func vbPicks(n, max int) []int {
	rng := rand.New(rand.NewPCG(7, 8))
	out := make([]int, n)
	for i := range out {
		out[i] = rng.IntN(max)
	}
	return out
}

const vbPicksN = 1 << 18

var vbSink int64

func vbRawGetOp(b *testing.B, d *vbData) func(int) {
	picks := vbPicks(vbPicksN, vbDocs)
	keys := make([][]byte, len(picks))
	for i, p := range picks {
		keys[i] = codec.AppendDesc(vbPrefix(d.ids[p]), vbVersions)
	}
	var out []byte
	return func(i int) {
		k := keys[i%len(keys)]
		v, closer, err := d.raw.Get(k)
		if err != nil {
			b.Fatal(err)
		}
		n, _, _ := codec.DecodeDesc(k[len(k)-codec.NumberSize:])
		_ = codec.Raw{}.Decode(v, &out)
		_ = closer.Close()
		if n != vbVersions || len(out) != vbValueSize {
			b.Fatalf("got version %d, %d bytes", n, len(out))
		}
	}
}

// vbHot is the hot set of the op=latest-known pair: the first documents
// of the random picks.
const vbHot = 1000

func vbHotIDs(d *vbData) []string {
	picks := vbPicks(vbHot, vbDocs)
	ids := make([]string, len(picks))
	for i, p := range picks {
		ids[i] = d.ids[p]
	}
	return ids
}

// vbHotGetOp is vbRawGetOp over the hot set.
func vbHotGetOp(b *testing.B, d *vbData) func(int) {
	ids := vbHotIDs(d)
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = codec.AppendDesc(vbPrefix(id), vbVersions)
	}
	var out []byte
	return func(i int) {
		k := keys[i%len(keys)]
		v, closer, err := d.raw.Get(k)
		if err != nil {
			b.Fatal(err)
		}
		n, _, _ := codec.DecodeDesc(k[len(k)-codec.NumberSize:])
		_ = codec.Raw{}.Decode(v, &out)
		_ = closer.Close()
		if n != vbVersions || len(out) != vbValueSize {
			b.Fatalf("got version %d, %d bytes", n, len(out))
		}
	}
}

// vbLatestKnownOp is Latest over the hot set, once the DB's version cache
// knows their latest versions: a Prune that keeps every version reads
// each document's latest and oldest and writes nothing.
func vbLatestKnownOp(b *testing.B, d *vbData) func(int) {
	ids := vbHotIDs(d)
	for _, id := range ids {
		n, err := d.docs.Prune(d.db, id, vbVersions)
		require.NoError(b, err)
		require.Zero(b, n)
	}
	return func(i int) {
		doc, err := d.docs.Latest(ids[i%len(ids)])
		if err != nil || doc.Version != vbVersions || len(doc.Value) != vbValueSize {
			b.Fatalf("got version %d, %d bytes, %v", doc.Version, len(doc.Value), err)
		}
	}
}

// vbRawSeekOp is Latest in raw Pebble: a prefix seek (bloom filters) in an
// iterator bounded to the document.
func vbRawSeekOp(b *testing.B, d *vbData) func(int) {
	picks := vbPicks(vbPicksN, vbDocs)
	bounds := make([][2][]byte, len(picks))
	for i, p := range picks {
		pre := vbPrefix(d.ids[p])
		bounds[i] = [2][]byte{pre, codec.AppendDesc(bytes.Clone(pre), 0)}
	}
	var out []byte
	return func(i int) {
		lo, hi := bounds[i%len(bounds)][0], bounds[i%len(bounds)][1]
		it, err := d.raw.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi, UseL6Filters: true})
		if err != nil {
			b.Fatal(err)
		}
		if !it.SeekPrefixGE(lo) {
			b.Fatal("not found")
		}
		n, _, _ := codec.DecodeDesc(it.Key()[len(lo):])
		v, err := it.ValueAndErr()
		if err != nil {
			b.Fatal(err)
		}
		_ = codec.Raw{}.Decode(v, &out)
		if err := it.Close(); err != nil || n != vbVersions || len(out) != vbValueSize {
			b.Fatalf("got version %d, %d bytes, %v", n, len(out), err)
		}
	}
}

// vbLatestOp reads the Latest of random documents, or of random missing
// ones (ids that sort among the present ones).
func vbLatestOp(b *testing.B, d *vbData, missing bool) func(int) {
	picks := vbPicks(vbPicksN, vbDocs)
	ids := make([]string, len(picks))
	for i, p := range picks {
		ids[i] = d.ids[p]
		if missing {
			ids[i] += "-missing"
		}
	}
	return func(i int) {
		doc, err := d.docs.Latest(ids[i%len(ids)])
		if missing {
			if err == nil {
				b.Fatal("found a missing document")
			}
			return
		}
		if err != nil || doc.Version != vbVersions || len(doc.Value) != vbValueSize {
			b.Fatalf("got version %d, %d bytes, %v", doc.Version, len(doc.Value), err)
		}
	}
}

func vbAsOfOp(b *testing.B, d *vbData) func(int) {
	picks := vbPicks(vbPicksN, vbDocs)
	ids := make([]string, len(picks))
	at := make([]int64, len(picks))
	for i, p := range picks {
		ids[i], at[i] = d.ids[p], 1+int64(i%vbVersions)
	}
	return func(i int) {
		j := i % len(ids)
		doc, err := d.docs.AsOf(ids[j], at[j])
		if err != nil || doc.Version != at[j] || len(doc.Value) != vbValueSize {
			b.Fatalf("got version %d, %d bytes, %v", doc.Version, len(doc.Value), err)
		}
	}
}

// vbHistoryIDs picks the documents of History of n: the main ones for 10,
// the deep ones beyond.
func vbHistoryIDs(d *vbData, n int) []string {
	pool := d.ids
	if n > vbVersions {
		pool = d.deep
	}
	picks := vbPicks(vbPicksN, len(pool))
	ids := make([]string, len(picks))
	for i, p := range picks {
		ids[i] = pool[p]
	}
	return ids
}

// vbRawScanOp reads the n newest versions of random documents with raw
// Pebble: a forward scan of the tipkv layout, or a reverse scan (Last,
// Prev) of the ascending layout.
func vbRawScanOp(b *testing.B, d *vbData, n int, reverse bool) func(int) {
	ids := vbHistoryIDs(d, n)
	db, bounds := d.raw, make([][2][]byte, len(ids))
	for i, id := range ids {
		p := vbPrefix(id)
		bounds[i] = [2][]byte{p, codec.AppendDesc(bytes.Clone(p), 0)}
		if reverse {
			db, bounds[i][1] = d.asc, codec.PrefixEnd(p)
		}
	}
	var out []byte
	return func(i int) {
		lo, hi := bounds[i%len(bounds)][0], bounds[i%len(bounds)][1]
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			b.Fatal(err)
		}
		count := 0
		ok, step, decode := it.SeekGE(lo), it.Next, codec.DecodeDesc
		if reverse {
			ok, step, decode = it.Last(), it.Prev, codec.DecodeAsc
		}
		for ; ok && count < n; ok = step() {
			v, _, _ := decode(it.Key()[len(lo):])
			val, err := it.ValueAndErr()
			if err != nil {
				b.Fatal(err)
			}
			_ = codec.Raw{}.Decode(val, &out)
			vbSink += v
			count++
		}
		if err := it.Close(); err != nil || count != n {
			b.Fatalf("read %d, %v", count, err)
		}
	}
}

func vbHistoryOp(b *testing.B, d *vbData, n int) func(int) {
	ids := vbHistoryIDs(d, n)
	q := tipkv.Query{Limit: n}
	return func(i int) {
		count := 0
		for doc, err := range d.docs.History(ids[i%len(ids)], q) {
			if err != nil {
				b.Fatal(err)
			}
			vbSink += doc.Version
			count++
		}
		if count != n {
			b.Fatalf("read %d", count)
		}
	}
}

// vbLatestAllOp reads the latest version of 1,000 documents that have
// versions versions each: the cost per document must not grow with them.
func vbLatestAllOp(b *testing.B, d *vbData, versions int) func(int) {
	q := tipkv.Query{Prefix: "doc-000"}
	if versions > vbVersions {
		q.Prefix = "deep-"
	}
	return func(int) {
		count := 0
		for doc, err := range d.docs.LatestAll(q) {
			if err != nil || doc.Version != int64(versions) {
				b.Fatalf("version %d, %v", doc.Version, err)
			}
			count++
		}
		if count != 1000 {
			b.Fatalf("read %d documents", count)
		}
	}
}

// vbRawScanAllOp is LatestAll without the skip: a forward scan over every
// version of the 1,000 deep documents, keeping the first of each.
func vbRawScanAllOp(b *testing.B, d *vbData) func(int) {
	lo := codec.AppendFamily(nil, codec.FamilyVersions)
	lo = codec.AppendString(lo, vbColl)
	lo = append(lo, "deep-"...)
	hi := codec.PrefixEnd(lo)
	var out []byte
	return func(int) {
		it, err := d.raw.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			b.Fatal(err)
		}
		var prev []byte
		count := 0
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			n := len(k) - codec.NumberSize
			if bytes.Equal(prev, k[:n]) {
				continue
			}
			prev = append(prev[:0], k[:n]...)
			id, rest, err := codec.DecodeString(k[len(lo)-len("deep-"):])
			v, _, _ := codec.DecodeDesc(rest)
			val, verr := it.ValueAndErr()
			if err != nil || verr != nil || v != vbDeepVers || id == "" {
				b.Fatalf("%q v%d: %v %v", id, v, err, verr)
			}
			_ = codec.Raw{}.Decode(val, &out)
			count++
		}
		if err := it.Close(); err != nil || count != vbDeepDocs {
			b.Fatalf("read %d documents: %v", count, err)
		}
	}
}

// vbRawPutOp writes the next version of random documents (of the first
// docs documents) on a fresh copy of the data set: a Set, after a Get of
// the latest key when withGet (the read a version number needs).
func vbRawPutOp(b *testing.B, d *vbData, docs int, withGet bool) func(int) {
	raw := vbOpenPebbleSized(b, vbClone(b, d.pristine, b.TempDir()), vbWriteCache, vbWriteMemTable)
	b.Cleanup(func() { _ = raw.Close() })
	picks := vbPicks(vbPicksN, docs)
	prefixes := make([][]byte, docs)
	latest := make([]int64, docs)
	for i := range prefixes {
		prefixes[i] = vbPrefix(d.ids[i])
		latest[i] = vbVersions
	}
	value := vbValue(rand.New(rand.NewPCG(3, 4)))
	key := make([]byte, 0, 64)
	return func(i int) {
		p := picks[i%len(picks)]
		if withGet {
			key = codec.AppendDesc(append(key[:0], prefixes[p]...), latest[p])
			_, closer, err := raw.Get(key)
			if err != nil {
				b.Fatal(err)
			}
			_ = closer.Close()
		}
		latest[p]++
		key = codec.AppendDesc(append(key[:0], prefixes[p]...), latest[p])
		if err := raw.Set(key, value, pebble.NoSync); err != nil {
			b.Fatal(err)
		}
	}
}

// vbPutOp is Put (NoSync, one per Update) of random documents on a fresh
// copy of the data set.
func vbPutOp(b *testing.B, d *vbData, docs int) func(int) {
	db, coll := vbOpenTipkv(b, vbClone(b, d.pristine, b.TempDir()),
		&tipkv.Options{NoSync: true, CacheSize: vbWriteCache, MemTableSize: vbWriteMemTable})
	b.Cleanup(func() { _ = db.Close() })
	picks := vbPicks(vbPicksN, docs)
	latest := make([]int64, docs)
	for i := range latest {
		latest[i] = vbVersions
	}
	value := vbValue(rand.New(rand.NewPCG(3, 4)))
	return func(i int) {
		p := picks[i%len(picks)]
		v, err := coll.Put(db, d.ids[p], value)
		if latest[p]++; err != nil || v != latest[p] {
			b.Fatalf("put version %d, want %d: %v", v, latest[p], err)
		}
	}
}
