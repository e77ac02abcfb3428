package tipkv_test

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

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage/pebblestore"
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
// overhead. Run (about 3 minutes on 2 cores):
//
//	go test -run '^$' -bench 'BenchmarkVersions' -count 6 . | tee versions.txt
//	benchstat -col /impl versions.txt
//
// Each tipkv benchmark also reports "ratio": its time per op over its
// baseline's, measured just before in the same process (below 1 is faster).
// Put benchmarks report it as throughput: baseline time over tipkv time.

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

// vbPebbleOptions configures raw Pebble as tipkv configures it.
func vbPebbleOptions() *pebble.Options {
	cache := pebble.NewCache(128 << 20)
	opts := &pebble.Options{
		Comparer:           pebblestore.Comparer,
		Cache:              cache,
		MemTableSize:       16 << 20,
		FormatMajorVersion: pebblestore.FormatMajorVersion,
		Logger:             vbQuiet{},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	return opts
}

func vbOpenPebble(b testing.TB, dir string) *pebble.DB {
	b.Helper()
	opts := vbPebbleOptions()
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
	s, err := link.Store(db)
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

// vbTimes holds the ns/op of baselines measured earlier in the run.
var vbTimes sync.Map

func vbNs(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }

// vbBaseline records b's time per op under name.
func vbBaseline(b *testing.B, name string) { vbTimes.Store(name, vbNs(b)) }

// vbRatio reports b's time per op over the baseline's (time), or the
// baseline's over b's (throughput).
func vbRatio(b *testing.B, name string, throughput bool) {
	base, ok := vbTimes.Load(name)
	if !ok {
		return
	}
	r := vbNs(b) / base.(float64)
	if throughput {
		r = 1 / r
	}
	b.ReportMetric(r, "ratio")
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

	b.Run("op=latest/impl=raw-get", func(b *testing.B) { vbRawGet(b, data(b)) })
	b.Run("op=latest/impl=tipkv", func(b *testing.B) { vbLatest(b, data(b), false, "latest/raw-get") })
	b.Run("op=asof/impl=tipkv-latest", func(b *testing.B) { vbLatest(b, data(b), false, "") })
	b.Run("op=asof/impl=tipkv", func(b *testing.B) { vbAsOf(b, data(b)) })
	b.Run("op=latest-missing/impl=tipkv-present", func(b *testing.B) { vbLatest(b, data(b), false, "") })
	b.Run("op=latest-missing/impl=tipkv", func(b *testing.B) { vbLatest(b, data(b), true, "") })
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("op=history-%d/impl=raw-forward", n), func(b *testing.B) { vbRawForward(b, data(b), n) })
		b.Run(fmt.Sprintf("op=history-%d/impl=raw-asc-reverse", n), func(b *testing.B) { vbRawReverse(b, data(b), n) })
		b.Run(fmt.Sprintf("op=history-%d/impl=tipkv", n), func(b *testing.B) { vbHistory(b, data(b), n) })
	}
	b.Run(fmt.Sprintf("op=latest-all/versions=%d/impl=tipkv", vbVersions), func(b *testing.B) { vbLatestAll(b, data(b), vbVersions) })
	b.Run(fmt.Sprintf("op=latest-all/versions=%d/impl=raw-scan", vbDeepVers), func(b *testing.B) { vbRawScanAll(b, data(b)) })
	b.Run(fmt.Sprintf("op=latest-all/versions=%d/impl=tipkv", vbDeepVers), func(b *testing.B) { vbLatestAll(b, data(b), vbDeepVers) })
	b.Run("op=put/impl=raw-get-set", func(b *testing.B) { vbRawPut(b, data(b), vbDocs, true, "put/raw-get-set") })
	b.Run("op=put/impl=tipkv", func(b *testing.B) { vbPut(b, data(b), vbDocs, "put/raw-get-set") })
	b.Run("op=put-hot/impl=raw-set", func(b *testing.B) { vbRawPut(b, data(b), 1000, false, "put-hot/raw-set") })
	b.Run("op=put-hot/impl=tipkv", func(b *testing.B) { vbPut(b, data(b), 1000, "put-hot/raw-set") })
}

const vbPicksN = 1 << 18

var vbSink int64

func vbRawGet(b *testing.B, d *vbData) {
	picks := vbPicks(vbPicksN, vbDocs)
	keys := make([][]byte, len(picks))
	for i, p := range picks {
		keys[i] = codec.AppendDesc(vbPrefix(d.ids[p]), vbVersions)
	}
	var out []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
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
	vbBaseline(b, "latest/raw-get")
}

// vbLatest reads the Latest of random documents, or of random missing
// ones (ids that sort among the present ones).
func vbLatest(b *testing.B, d *vbData, missing bool, vs string) {
	picks := vbPicks(vbPicksN, vbDocs)
	ids := make([]string, len(picks))
	for i, p := range picks {
		ids[i] = d.ids[p]
		if missing {
			ids[i] += "-missing"
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		doc, err := d.docs.Latest(ids[i%len(ids)])
		if missing {
			if err == nil {
				b.Fatal("found a missing document")
			}
			continue
		}
		if err != nil || doc.Version != vbVersions || len(doc.Value) != vbValueSize {
			b.Fatalf("got version %d, %d bytes, %v", doc.Version, len(doc.Value), err)
		}
	}
	if missing {
		vbRatio(b, "latest/tipkv", false)
		return
	}
	if vs != "" {
		vbRatio(b, vs, false)
	}
	vbBaseline(b, "latest/tipkv")
}

func vbAsOf(b *testing.B, d *vbData) {
	picks := vbPicks(vbPicksN, vbDocs)
	ids := make([]string, len(picks))
	at := make([]int64, len(picks))
	for i, p := range picks {
		ids[i], at[i] = d.ids[p], 1+int64(i%vbVersions)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := i % len(ids)
		doc, err := d.docs.AsOf(ids[j], at[j])
		if err != nil || doc.Version != at[j] || len(doc.Value) != vbValueSize {
			b.Fatalf("got version %d, %d bytes, %v", doc.Version, len(doc.Value), err)
		}
	}
	vbRatio(b, "latest/tipkv", false)
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

func vbRawForward(b *testing.B, d *vbData, n int) {
	ids := vbHistoryIDs(d, n)
	bounds := make([][2][]byte, len(ids))
	for i, id := range ids {
		p := vbPrefix(id)
		bounds[i] = [2][]byte{p, codec.AppendDesc(bytes.Clone(p), 0)}
	}
	var out []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		lo, hi := bounds[i%len(bounds)][0], bounds[i%len(bounds)][1]
		it, err := d.raw.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			b.Fatal(err)
		}
		count := 0
		for ok := it.SeekGE(lo); ok && count < n; ok = it.Next() {
			v, _, _ := codec.DecodeDesc(it.Key()[len(lo):])
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
	vbBaseline(b, fmt.Sprintf("history-%d/raw-forward", n))
}

func vbRawReverse(b *testing.B, d *vbData, n int) {
	ids := vbHistoryIDs(d, n)
	bounds := make([][2][]byte, len(ids))
	for i, id := range ids {
		p := vbPrefix(id)
		bounds[i] = [2][]byte{p, codec.PrefixEnd(p)}
	}
	var out []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		lo, hi := bounds[i%len(bounds)][0], bounds[i%len(bounds)][1]
		it, err := d.asc.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			b.Fatal(err)
		}
		count := 0
		for ok := it.Last(); ok && count < n; ok = it.Prev() {
			v, _, _ := codec.DecodeAsc(it.Key()[len(lo):])
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
	vbBaseline(b, fmt.Sprintf("history-%d/raw-asc-reverse", n))
}

func vbHistory(b *testing.B, d *vbData, n int) {
	ids := vbHistoryIDs(d, n)
	q := tipkv.Query{Limit: n}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
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
	vbRatio(b, fmt.Sprintf("history-%d/raw-forward", n), false)
	if base, ok := vbTimes.Load(fmt.Sprintf("history-%d/raw-asc-reverse", n)); ok {
		b.ReportMetric(vbNs(b)/base.(float64), "ratio-vs-asc")
	}
}

// vbLatestAll reads the latest version of 1,000 documents that have
// versions each: the cost per document must not grow with versions.
func vbLatestAll(b *testing.B, d *vbData, versions int) {
	q := tipkv.Query{Prefix: "doc-000"}
	if versions > vbVersions {
		q.Prefix = "deep-"
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
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
	b.ReportMetric(vbNs(b)/1000, "ns/doc")
	if versions > vbVersions {
		vbRatio(b, "latest-all/raw-scan", false)
	}
}

// vbRawScanAll is LatestAll without the skip: a forward scan over every
// version of the 1,000 deep documents, keeping the first of each.
func vbRawScanAll(b *testing.B, d *vbData) {
	lo := codec.AppendFamily(nil, codec.FamilyVersions)
	lo = codec.AppendString(lo, vbColl)
	lo = append(lo, "deep-"...)
	hi := codec.PrefixEnd(lo)
	var out []byte
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
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
	b.ReportMetric(vbNs(b)/vbDeepDocs, "ns/doc")
	vbBaseline(b, "latest-all/raw-scan")
}

// vbRawPut writes the next version of random documents (of the first docs
// documents) on a fresh copy of the data set: a Set, after a Get of the
// latest key when withGet (the read a version number needs).
func vbRawPut(b *testing.B, d *vbData, docs int, withGet bool, name string) {
	raw := vbOpenPebble(b, vbClone(b, d.pristine, b.TempDir()))
	defer raw.Close()
	picks := vbPicks(vbPicksN, docs)
	prefixes := make([][]byte, docs)
	latest := make([]int64, docs)
	for i := range prefixes {
		prefixes[i] = vbPrefix(d.ids[i])
		latest[i] = vbVersions
	}
	value := vbValue(rand.New(rand.NewPCG(3, 4)))
	key := make([]byte, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
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
	b.StopTimer()
	vbBaseline(b, name)
}

func vbPut(b *testing.B, d *vbData, docs int, vs string) {
	db, coll := vbOpenTipkv(b, vbClone(b, d.pristine, b.TempDir()), &tipkv.Options{NoSync: true})
	defer db.Close()
	picks := vbPicks(vbPicksN, docs)
	latest := make([]int64, docs)
	for i := range latest {
		latest[i] = vbVersions
	}
	value := vbValue(rand.New(rand.NewPCG(3, 4)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p := picks[i%len(picks)]
		v, err := coll.Put(db, d.ids[p], value)
		if latest[p]++; err != nil || v != latest[p] {
			b.Fatalf("put version %d, want %d: %v", v, latest[p], err)
		}
	}
	b.StopTimer()
	vbRatio(b, vs, true)
}
