package queue_test

import (
	"encoding/binary"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/queue"
)

// Queue benchmarks. Every store is on disk in b.TempDir(). Run:
//
//	go test -run '^$' -bench 'BenchmarkQueue/op=(receive-ack|naive)' -benchtime 300x ./queue
//	go test -run '^$' -bench 'BenchmarkQueue/op=enqueue' ./queue
//	go test -run '^$' -bench 'BenchmarkQueue/op=(synced|raw-synced)' -benchtime 2s ./queue

const qbPayload = 100 // bytes per message

func qbItems(n int) [][]byte {
	items := make([][]byte, n)
	for i := range items {
		items[i] = make([]byte, qbPayload)
		for k := range items[i] {
			items[i][k] = byte('a' + (i+k)%26)
		}
	}
	return items
}

func qbOpen(b testing.TB, dir string, opts *tipkv.Options) (*tipkv.DB, *queue.Queue[[]byte]) {
	b.Helper()
	db, err := tipkv.Open(dir, opts)
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	q, err := queue.Open(db, "bench", &queue.Options[[]byte]{Codec: codec.Raw{}, MaxAttempts: -1})
	require.NoError(b, err)
	return db, q
}

// qbPebble opens raw Pebble with the options tipkv runs with
// (pebblestore.Options: comparer, cache, memtable, filters, format, values
// kept in their data blocks), optionally without automatic compactions.
func qbPebble(b testing.TB, dir string, noCompactions bool) *pebble.DB {
	b.Helper()
	cache := pebble.NewCache(128 << 20)
	defer cache.Unref()
	opts := pebblestore.Options(pebblestore.Config{MemTableSize: 16 << 20}, cache)
	opts.DisableAutomaticCompactions = noCompactions
	opts.Logger = qbQuiet{}
	db, err := pebble.Open(dir, opts)
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	return db
}

type qbQuiet struct{}

func (qbQuiet) Infof(string, ...any)         {}
func (qbQuiet) Errorf(f string, args ...any) { pebble.DefaultLogger.Errorf(f, args...) }
func (qbQuiet) Fatalf(f string, args ...any) { pebble.DefaultLogger.Fatalf(f, args...) }

var qbPrefix = codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "bench")

func qbKey(dst []byte, seq int64) []byte { return codec.AppendAsc(append(dst, qbPrefix...), seq) }

// qbValue is the bytes the queue stores for a new message: its header
// (format, attempts, enqueue time, visible-at) and the payload.
func qbValue(payload []byte) []byte {
	v := []byte{0x01}
	v = binary.AppendUvarint(v, 0)
	v = binary.AppendVarint(v, time.Now().UnixNano())
	v = binary.AppendVarint(v, 0)
	return append(v, payload...)
}

// qbEnqueue enqueues n messages in batches of 1,000.
func qbEnqueue(b testing.TB, db *tipkv.DB, q *queue.Queue[[]byte], n int) {
	items := qbItems(1000)
	for n > 0 {
		k := min(n, 1000)
		push(b, db, q, items[:k]...)
		n -= k
	}
}

// ratios holds figures of baselines measured earlier in the same run.
var ratios sync.Map

func nsPerOp(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }

func BenchmarkQueue(b *testing.B) {
	for _, consumed := range []int{0, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("op=receive-ack,consumed=%d", consumed), func(b *testing.B) {
			benchReceiveAck(b, consumed)
		})
	}
	for _, consumed := range []int{0, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("op=naive-receive-delete,consumed=%d", consumed), func(b *testing.B) {
			benchNaive(b, consumed)
		})
	}
	b.Run("op=enqueue,batch=1000", benchEnqueue)
	for _, p := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("op=raw-synced,writers=%d", p), func(b *testing.B) { benchRawSynced(b, p) })
	}
	for _, p := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("op=synced-enqueue,writers=%d", p), func(b *testing.B) { benchSynced(b, p) })
	}
}

// Receive+Ack of 100 messages with consumed messages before the head:
// received and acked in batches of 1,000 (so deleted by range tombstones),
// flushed, and Pebble's own background work left to finish (never
// compacted by hand). For consumed > 0 the same operation on a second store with
// nothing consumed runs interleaved, and x_consumed0 is the ratio of the
// two: load on the machine hits both alike.
func benchReceiveAck(b *testing.B, consumed int) {
	db, q := qbReceiveAckStore(b, consumed)
	var base *qbStore
	if consumed > 0 {
		bdb, bq := qbReceiveAckStore(b, 0)
		base = &qbStore{db: bdb, q: bq}
	}
	var ours, theirs qbMeter
	b.ReportAllocs()
	op := func(db *tipkv.DB, q *queue.Queue[[]byte]) {
		ms, err := q.Receive(100, time.Hour)
		if err != nil || len(ms) != 100 {
			b.Fatalf("receive: %d messages, %v", len(ms), err)
		}
		if err := q.Ack(db, qbIDs(ms)...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		ours.run(func() { op(db, q) })
		if base != nil {
			theirs.run(func() { op(base.db, base.q) })
		}
	}
	b.StopTimer()
	ours.report(b)
	ratios.Store(fmt.Sprint("receive-ack-", consumed), ours.nsPerOp())
	if base != nil {
		b.ReportMetric(ours.ratio(theirs), "x_consumed0")
		b.ReportMetric(ours.median()/theirs.median(), "x_consumed0_p50")
	}
	if st := q.Stats(); st.Len != 0 || st.Head != int64(consumed+b.N*100+1) {
		b.Fatalf("after the run: %+v", st)
	}
}

type qbStore struct {
	db *tipkv.DB
	q  *queue.Queue[[]byte]
}

func qbReceiveAckStore(b *testing.B, consumed int) (*tipkv.DB, *queue.Queue[[]byte]) {
	db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
	qbEnqueue(b, db, q, consumed+b.N*100)
	for left := consumed; left > 0; {
		ms, err := q.Receive(min(left, 1000), time.Hour)
		require.NoError(b, err)
		require.NoError(b, q.Ack(db, qbIDs(ms)...))
		left -= len(ms)
	}
	require.NoError(b, db.Flush())
	qbSettle(b, db)
	return db, q
}

// qbSettle waits, up to 30s, until the store has had no flush or
// compaction running for 200ms: the work a setup started in the background
// is done, so what is measured next pays only for itself. It logs what is
// left on disk: consumed messages whose tombstones Pebble has not yet
// compacted away still lie there, before the head.
func qbSettle(b testing.TB, db *tipkv.DB) {
	s, err := link.StoreOf(db)
	require.NoError(b, err)
	ps := s.(*pebblestore.Store)
	busy := func() bool {
		m, err := ps.PebbleMetrics()
		require.NoError(b, err)
		return m.Compact.NumInProgress > 0 || m.Flush.NumInProgress > 0
	}
	t0 := time.Now()
	for quiet := 0; quiet < 4 && time.Since(t0) < 30*time.Second; {
		time.Sleep(50 * time.Millisecond)
		if busy() {
			quiet = 0
		} else {
			quiet++
		}
	}
	m, err := ps.PebbleMetrics()
	require.NoError(b, err)
	var files int64
	for _, l := range m.Levels {
		files += l.TablesCount
	}
	b.Logf("settled in %v: %d tables, %.1f MiB", time.Since(t0).Round(time.Millisecond), files, float64(m.Table.Local.LiveSize)/(1<<20))
}

// qbMeter times and counts the allocations of one side of a paired
// benchmark. Pebble's background work allocates too and is counted, as it
// is by b.ReportAllocs.
type qbMeter struct {
	n               int
	ns              time.Duration
	mallocs, nbytes uint64
	times           []time.Duration
}

func (m *qbMeter) run(f func()) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	d := time.Since(start)
	m.ns += d
	m.times = append(m.times, d)
	runtime.ReadMemStats(&after)
	m.n++
	m.mallocs += after.Mallocs - before.Mallocs
	m.nbytes += after.TotalAlloc - before.TotalAlloc
}

func (m *qbMeter) nsPerOp() float64 { return float64(m.ns.Nanoseconds()) / float64(m.n) }

// median is the median time of one op: steadier than the mean on a busy
// machine, where a few ops stall behind a flush or a descheduling.
func (m *qbMeter) median() float64 {
	ts := slices.Clone(m.times)
	slices.Sort(ts)
	return float64(ts[len(ts)/2].Nanoseconds())
}

// report replaces the benchmark's ns/op (which covers both sides) with
// this side's figures.
func (m *qbMeter) report(b *testing.B) {
	b.ReportMetric(m.nsPerOp(), "ns/op")
	b.ReportMetric(float64(m.nbytes)/float64(m.n), "B/op")
	b.ReportMetric(float64(m.mallocs)/float64(m.n), "allocs/op")
}

// ratio is m's time per op over other's.
func (m *qbMeter) ratio(other qbMeter) float64 { return m.nsPerOp() / other.nsPerOp() }

func qbIDs(ms []queue.Message[[]byte]) []queue.ID {
	ids := make([]queue.ID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// The naive queue: the same keys and values in raw Pebble, read from
// <queue, 0> every time, consumed with point deletes, compactions off so
// the tombstones stay (as they do until Pebble gets to them). x_tipkv is
// its time over the queue's at the same count.
func benchNaive(b *testing.B, consumed int) {
	db := qbPebble(b, b.TempDir(), true)
	total := consumed + b.N*100
	val := qbValue(qbItems(1)[0])
	var key []byte
	for seq := 1; seq <= total; seq += 1000 {
		batch := db.NewBatch()
		for s := seq; s < seq+1000 && s <= total; s++ {
			key = qbKey(key[:0], int64(s))
			require.NoError(b, batch.Set(key, val, nil))
		}
		require.NoError(b, batch.Commit(pebble.NoSync))
	}
	for seq := 1; seq <= consumed; seq += 1000 {
		batch := db.NewBatch()
		for s := seq; s < seq+1000 && s <= consumed; s++ {
			key = qbKey(key[:0], int64(s))
			require.NoError(b, batch.Delete(key, nil))
		}
		require.NoError(b, batch.Commit(pebble.NoSync))
	}
	require.NoError(b, db.Flush())
	lo, hi := qbKey(nil, 0), codec.PrefixEnd(qbPrefix)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			b.Fatal(err)
		}
		batch := db.NewBatch()
		n := 0
		for ok := it.First(); ok && n < 100; ok = it.Next() {
			if _, err := it.ValueAndErr(); err != nil {
				b.Fatal(err)
			}
			if err := batch.Delete(it.Key(), nil); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := it.Close(); err != nil || n != 100 {
			b.Fatalf("naive receive: %d messages, %v", n, err)
		}
		if err := batch.Commit(pebble.NoSync); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if ours, ok := ratios.Load(fmt.Sprint("receive-ack-", consumed)); ok {
		b.ReportMetric(nsPerOp(b)/ours.(float64), "x_tipkv")
	}
}

// Enqueue of 1,000 messages in one call, not synced, interleaved with raw
// Pebble committing one batch of 1,000 Sets of the same keys and values to
// a second store configured alike. x_raw_speed is raw time over queue
// time: the queue's share of raw Pebble's speed.
func benchEnqueue(b *testing.B) {
	db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
	raw := qbPebble(b, b.TempDir(), false)
	items := qbItems(1000)
	vals := make([][]byte, len(items))
	for i, p := range items {
		vals[i] = qbValue(p)
	}
	var key []byte
	seq := int64(1)
	rawOp := func() {
		batch := raw.NewBatch()
		for _, v := range vals {
			key = qbKey(key[:0], seq)
			seq++
			if err := batch.Set(key, v, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Commit(pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		_ = batch.Close()
	}
	var ours, theirs qbMeter
	b.ReportAllocs()
	b.ResetTimer()
	enqueue := func() {
		if _, err := q.Enqueue(db, items...); err != nil {
			b.Fatal(err)
		}
	}
	for i := range b.N {
		if i%2 == 0 { // alternate who goes first
			theirs.run(rawOp)
			ours.run(enqueue)
		} else {
			ours.run(enqueue)
			theirs.run(rawOp)
		}
	}
	b.StopTimer()
	ours.report(b)
	b.ReportMetric(1000/(ours.nsPerOp()/1e9), "items/s")
	b.ReportMetric(theirs.nsPerOp(), "raw-ns/op")
	b.ReportMetric(theirs.ratio(ours), "x_raw_speed")
	b.ReportMetric(theirs.median()/ours.median(), "x_raw_speed_p50")
	if got := q.Len(); got != b.N*1000 {
		b.Fatalf("Len %d, want %d", got, b.N*1000)
	}
}

// splitN runs f(i) for i in [0, n) on p goroutines.
func splitN(n, p int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, p)
	for g := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += p {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Synced enqueues of one message per Update from p producers: group
// commit.
func benchSynced(b *testing.B, p int) {
	db, q := qbOpen(b, b.TempDir(), nil)
	item := qbItems(1)[0]
	nOne := qbPhased(b, p, func(int) error {
		return db.Update(func(batch *tipkv.Batch) error { _, err := q.Enqueue(batch, item); return err })
	})
	require.Equal(b, b.N+nOne, q.Len())
}

// Raw Pebble synced Sets from p writers, measured alike, for scale.
func benchRawSynced(b *testing.B, p int) {
	db := qbPebble(b, b.TempDir(), false)
	val := qbValue(qbItems(1)[0])
	var seq atomic.Int64
	qbPhased(b, p, func(int) error {
		return db.Set(qbKey(nil, seq.Add(1)), val, pebble.Sync)
	})
}

// qbPhased runs b.N writes from p goroutines. For p > 1, phases of p
// writers (32 writes each) alternate with phases of one writer (32
// writes), so that x_1_writer compares the two under the same disk and
// machine load. ns/op and items/s are the p writers'. It returns how many
// single-writer writes it made.
func qbPhased(b *testing.B, p int, write func(int) error) int {
	b.ReportAllocs()
	b.ResetTimer()
	var many, one time.Duration
	nOne := 0
	for n := 0; n < b.N; {
		k := min(32*p, b.N-n)
		start := time.Now()
		require.NoError(b, splitN(k, p, write))
		many += time.Since(start)
		n += k
		if p > 1 {
			start = time.Now()
			require.NoError(b, splitN(32, 1, write))
			one += time.Since(start)
			nOne += 32
		}
	}
	b.StopTimer()
	perSec := float64(b.N) / many.Seconds()
	b.ReportMetric(float64(many.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(perSec, "items/s")
	if p > 1 {
		b.ReportMetric(perSec/(float64(nOne)/one.Seconds()), "x_1_writer")
	}
	return nOne
}

var queueChurn = flag.Int("queue.churn", 0, "run TestQueueChurn with this many enqueue+ack cycles (1000000 for BENCHMARKS.md)")

// Churn: messages are enqueued and acked in batches of 1,000 with about
// 1,000 live, on disk, Pebble's compactions left to themselves. Disk usage
// is sampled through the run and must stay under churnDiskBound; Receive
// at the end must cost no more than 1.2x Receive at the start. Run:
//
//	go test ./queue -run TestQueueChurn -queue.churn 1000000 -v
func TestQueueChurn(t *testing.T) {
	if *queueChurn == 0 {
		t.Skip("run with -queue.churn 1000000")
	}
	const batch = 1000
	const churnDiskBound = 4 * 16 << 20 // four memtables (MemTableSize is 16 MiB)
	cycles := *queueChurn / batch
	db, q := qbOpen(t, t.TempDir(), &tipkv.Options{NoSync: true})
	items := qbItems(batch)
	push(t, db, q, items...)
	recv := make([]time.Duration, cycles)
	var maxDisk uint64
	ps, err := link.StoreOf(db)
	require.NoError(t, err)
	// breakdown returns the WAL (live and kept for recycling) and table
	// sizes and the table count, in MiB.
	breakdown := func() (wal, tables float64, files int64) {
		m, err := ps.(*pebblestore.Store).PebbleMetrics()
		require.NoError(t, err)
		for _, l := range m.Levels {
			files += l.TablesCount
		}
		return float64(m.WAL.PhysicalSize+m.WAL.ObsoletePhysicalSize) / (1 << 20),
			float64(m.Table.Local.LiveSize+m.Table.Local.ObsoleteSize+m.Table.Local.ZombieSize) / (1 << 20), files
	}
	t.Logf("%12s %9s %9s %8s %11s %6s %5s", "items acked", "disk MiB", "max MiB", "WAL MiB", "tables MiB", "tables", "live")
	sample := max(cycles/40, 1)
	start := time.Now()
	for c := range cycles {
		push(t, db, q, items...)
		t0 := time.Now()
		ms, err := q.Receive(batch, time.Hour)
		recv[c] = time.Since(t0)
		require.NoError(t, err)
		require.Len(t, ms, batch)
		require.NoError(t, q.Ack(db, qbIDs(ms)...))
		disk := db.DiskUsage()
		maxDisk = max(maxDisk, disk)
		if (c+1)%sample == 0 || c == 0 {
			wal, tables, files := breakdown()
			t.Logf("%12d %9.1f %9.1f %8.1f %11.2f %6d %5d", (c+1)*batch, float64(disk)/(1<<20), float64(maxDisk)/(1<<20), wal, tables, files, q.Len())
		}
	}
	elapsed := time.Since(start)
	n := max(cycles/20, 1)
	first, last := median(recv[:n]), median(recv[cycles-n:])
	t.Logf("%d cycles in %v (%.0f items/s enqueued and acked)", cycles, elapsed.Round(time.Millisecond), float64(cycles*batch)/elapsed.Seconds())
	t.Logf("Receive(%d): median %v over the first %d cycles, %v over the last %d: %.2fx", batch, first, n, last, n, float64(last)/float64(first))
	t.Logf("disk: max %.1f MiB, bound %d MiB", float64(maxDisk)/(1<<20), churnDiskBound>>20)
	require.Less(t, maxDisk, uint64(churnDiskBound), "disk usage over the bound")
	require.LessOrEqual(t, float64(last), 1.2*float64(first), "Receive slowed down over the run")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
