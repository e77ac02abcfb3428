package queue_test

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/paired"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/queuefmt"
	"github.com/tipkv/tipkv/queue"
)

// Queue operations against their physical floor: raw Pebble configured as
// tipkv configures it (qbPebble: comparer, cache, memtable, filters,
// format), on the same key and value bytes, doing only what the operation
// must do, paired in one process (paired.Ratio, internal/paired:
// interleaved rounds in alternating order, on CPU time; ratio is op/floor
// with its 95% interval, the median and the lowest and highest round).
// Everything NoSync, on disk. Run:
//
//	go test -run '^$' -bench 'BenchmarkQueueFloor' -benchtime 20000x ./queue
//	go test -run '^$' -bench 'BenchmarkQueueOpen' -benchtime 5x ./queue
func BenchmarkQueueFloor(b *testing.B) {
	// Pop(1) against a Get of the head the queue tracks and a commit of
	// its Delete.
	b.Run("op=pop-1", func(b *testing.B) {
		db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		raw := qbPebble(b, b.TempDir(), false)
		calls := qbCalls(b)
		qbEnqueue(b, db, q, calls)
		qbFill(b, raw, calls)
		head := int64(1)
		var key []byte
		op := func() {
			ms, err := q.Pop(1)
			if err != nil || len(ms) != 1 {
				b.Fatalf("pop: %d messages, %v", len(ms), err)
			}
		}
		defer qbAllocs(b, op)
		paired.Ratio(b, op, func() {
			key = qbKey(key[:0], head)
			v, closer, err := raw.Get(key)
			if err != nil || len(v) == 0 {
				b.Fatal(err)
			}
			_ = closer.Close()
			batch := raw.NewBatch()
			if err := batch.Delete(key, nil); err != nil {
				b.Fatal(err)
			}
			if err := batch.Commit(pebble.NoSync); err != nil {
				b.Fatal(err)
			}
			_ = batch.Close()
			head++
		})
	})

	// Pop(1) against what its own write costs through the same machinery:
	// a Get of the head from the store, and a link.Write (what Update
	// runs on) of its Delete and a Set of a state value, on a second
	// store. The ratio is the queue's own share of a Pop.
	b.Run("op=pop-1,vs=get-write", func(b *testing.B) {
		db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		db2, q2 := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		calls := qbCalls(b)
		qbEnqueue(b, db, q, calls)
		qbEnqueue(b, db2, q2, calls)
		s2, err := link.StoreOf(db2)
		require.NoError(b, err)
		stateKey := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "bench")
		head := int64(1)
		paired.Ratio(b, func() {
			ms, err := q.Pop(1)
			if err != nil || len(ms) != 1 {
				b.Fatalf("pop: %d messages, %v", len(ms), err)
			}
		}, func() {
			key := qbKey(nil, head)
			if v, err := s2.Get(key); err != nil || len(v) == 0 {
				b.Fatal(err)
			}
			head++
			err := link.Write(db2, func(tx *link.Tx) error {
				if err := tx.Batch.Delete(key); err != nil {
					return err
				}
				return tx.Batch.Set(stateKey, queuefmt.AppendState(nil, queuefmt.State{Head: head, Tail: head}))
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	})

	// Receive(100) and one Ack of the 100 against one bounded iteration
	// reading 100 values from the tracked head, a commit of 100 Sets (the
	// attempt counts Receive must write) and a commit of 100 Deletes.
	b.Run("op=receive-100-ack", func(b *testing.B) {
		const n = 100
		db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		raw := qbPebble(b, b.TempDir(), false)
		calls := qbCalls(b)
		qbEnqueue(b, db, q, calls*n)
		qbFill(b, raw, calls*n)
		op := func() {
			ms, err := q.Receive(n, time.Hour)
			if err != nil || len(ms) != n {
				b.Fatalf("receive: %d messages, %v", len(ms), err)
			}
			if err := q.Ack(db, qbIDs(ms)...); err != nil {
				b.Fatal(err)
			}
		}
		defer qbAllocs(b, op)
		paired.Ratio(b, op, qbReceiveAckFloor(b, raw, n))
	})

	// Receive(100) and one Ack against what their storage work costs
	// through the same machinery on a second DB holding the same queue:
	// one store iteration from the head reading 100 values, a link.Write
	// (what Update runs on) of their 100 attempt-count Sets, and a
	// link.Write of their 100 Deletes and a state Set. The ratio is the
	// queue's own share; op=receive-100-ack over it is what tipkv's store
	// and write path add to raw Pebble.
	b.Run("op=receive-100-ack,vs=iter-write", func(b *testing.B) {
		const n = 100
		db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		db2, q2 := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		calls := qbCalls(b)
		qbEnqueue(b, db, q, calls*n)
		qbEnqueue(b, db2, q2, calls*n)
		s2, err := link.StoreOf(db2)
		require.NoError(b, err)
		stateKey := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "bench")
		head := int64(1)
		var lo, hi, sv []byte
		keys := make([][]byte, n)
		vals := make([][]byte, n)
		paired.Ratio(b, func() {
			ms, err := q.Receive(n, time.Hour)
			if err != nil || len(ms) != n {
				b.Fatalf("receive: %d messages, %v", len(ms), err)
			}
			if err := q.Ack(db, qbIDs(ms)...); err != nil {
				b.Fatal(err)
			}
		}, func() {
			lo, hi = qbKey(lo[:0], head), qbKey(hi[:0], head+n)
			it, err := s2.NewIter(lo, hi)
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for ok := it.First(); ok; ok = it.Next() {
				v, err := it.Value()
				if err != nil {
					b.Fatal(err)
				}
				h, payload, err := queuefmt.ParseHeader(v, queuefmt.ItemFormat)
				if err != nil {
					b.Fatal(err)
				}
				h.Attempts++
				keys[i] = append(keys[i][:0], it.Key()...)
				vals[i] = append(queuefmt.AppendHeader(vals[i][:0], queuefmt.ItemFormat, h), payload...)
				i++
			}
			if err := it.Close(); err != nil || i != n {
				b.Fatalf("read %d, %v", i, err)
			}
			err = link.Write(db2, func(tx *link.Tx) error {
				for i, k := range keys {
					if err := tx.Batch.Set(k, vals[i]); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			head += n
			err = link.Write(db2, func(tx *link.Tx) error {
				for _, k := range keys {
					if err := tx.Batch.Delete(k); err != nil {
						return err
					}
				}
				sv = queuefmt.AppendState(sv[:0], queuefmt.State{Head: head, Tail: head, Counted: true, CountTo: head})
				return tx.Batch.Set(stateKey, sv)
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	})

	// What the floors leave out, on raw Pebble alone (no tipkv code):
	// a Pop's floor that also commits a Set of the queue-state key in its
	// Delete's batch (which a Pop must write: the head and the count that
	// make Open a few seeks), against the Pop floor above.
	b.Run("op=pop-floor-state,vs=pop-floor", func(b *testing.B) {
		calls := qbCalls(b)
		withState, without := qbPebble(b, b.TempDir(), false), qbPebble(b, b.TempDir(), false)
		qbFill(b, withState, calls)
		qbFill(b, without, calls)
		stateKey := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "bench")
		pop := func(raw *pebble.DB, state bool) func() {
			head := int64(1)
			var key, sv []byte
			return func() {
				key = qbKey(key[:0], head)
				v, closer, err := raw.Get(key)
				if err != nil || len(v) == 0 {
					b.Fatal(err)
				}
				_ = closer.Close()
				head++
				batch := raw.NewBatch()
				if err := batch.Delete(key, nil); err != nil {
					b.Fatal(err)
				}
				if state {
					sv = queuefmt.AppendState(sv[:0], queuefmt.State{Head: head, Tail: head, Counted: true, CountTo: head})
					if err := batch.Set(stateKey, sv, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := batch.Commit(pebble.NoSync); err != nil {
					b.Fatal(err)
				}
				_ = batch.Close()
			}
		}
		paired.Ratio(b, pop(withState, true), pop(without, false))
	})

	// The Receive(100)+Ack floor on a Pebble that keeps values in their
	// data blocks, as tipkv configures it (pebblestore's span policy, as
	// qbPebble), against the same floor on Pebble's default policy (values
	// after the first of a prefix in value blocks).
	b.Run("op=receive-100-ack-floor,pebble=values-inline", func(b *testing.B) {
		const n = 100
		calls := qbCalls(b)
		inline, dflt := qbPebble(b, b.TempDir(), false), qbPebbleSeparated(b, b.TempDir())
		qbFill(b, inline, calls*n)
		qbFill(b, dflt, calls*n)
		paired.Ratio(b, qbReceiveAckFloor(b, inline, n), qbReceiveAckFloor(b, dflt, n))
	})

	// Enqueue of one message per Update against a raw commit of one Set.
	// The queue's own share is the same Update writing the same Set
	// through the storage contract (link.Write, which is what Update and
	// every package's write run on): op=update-set against the floor, and
	// op=enqueue-1-update against op=update-set.
	item := qbItems(1)[0]
	val := qbValue(item)
	b.Run("op=enqueue-1-update", func(b *testing.B) {
		db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		raw := qbPebble(b, b.TempDir(), false)
		seq := int64(1)
		var key []byte
		op := func() {
			if err := db.Update(func(batch *tipkv.Batch) error { _, err := q.Enqueue(batch, item); return err }); err != nil {
				b.Fatal(err)
			}
		}
		defer qbAllocs(b, op)
		paired.Ratio(b, op, func() { qbRawSet(b, raw, &key, &seq, val) })
	})
	b.Run("op=update-set", func(b *testing.B) {
		db, _ := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		raw := qbPebble(b, b.TempDir(), false)
		seq, rseq := int64(1), int64(1)
		var key, rkey []byte
		op := func() {
			err := db.Update(func(batch *tipkv.Batch) error {
				return link.Write(batch, func(tx *link.Tx) error {
					key = qbKey(key[:0], seq)
					seq++
					return tx.Batch.Set(key, val)
				})
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		defer qbAllocs(b, op)
		paired.Ratio(b, op, func() { qbRawSet(b, raw, &rkey, &rseq, val) })
	})
	b.Run("op=enqueue-1-update,vs=update-set", func(b *testing.B) {
		db, q := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		db2, _ := qbOpen(b, b.TempDir(), &tipkv.Options{NoSync: true})
		seq := int64(1)
		var key []byte
		paired.Ratio(b, func() {
			if err := db.Update(func(batch *tipkv.Batch) error { _, err := q.Enqueue(batch, item); return err }); err != nil {
				b.Fatal(err)
			}
		}, func() {
			err := db2.Update(func(batch *tipkv.Batch) error {
				return link.Write(batch, func(tx *link.Tx) error {
					key = qbKey(key[:0], seq)
					seq++
					return tx.Batch.Set(key, val)
				})
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	})
}

// qbCalls is at least how many calls of each side paired.Ratio makes
// (b.N, or paired.Rounds+1 for a small b.N), and qbAllocsRuns more for
// qbAllocs.
func qbCalls(b *testing.B) int { return max(b.N, paired.Rounds+1) + qbAllocsRuns }

const qbAllocsRuns = 64

// qbAllocs reports op's allocations and bytes per call, over qbAllocsRuns
// calls after the timed ones (paired.Ratio runs with the timer stopped, so
// b.ReportAllocs would count nothing). Pebble's background work allocates
// too and is counted.
func qbAllocs(b *testing.B, op func()) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range qbAllocsRuns {
		op()
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/qbAllocsRuns, "allocs/call")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/qbAllocsRuns, "B/call")
}

// qbRawSet commits one Set of the next key to raw Pebble, NoSync.
func qbRawSet(b *testing.B, raw *pebble.DB, key *[]byte, seq *int64, val []byte) {
	*key = qbKey((*key)[:0], *seq)
	*seq++
	batch := raw.NewBatch()
	if err := batch.Set(*key, val, nil); err != nil {
		b.Fatal(err)
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		b.Fatal(err)
	}
	_ = batch.Close()
}

// qbFill writes n messages' keys and values into raw Pebble, 1,000 a batch.
func qbFill(b *testing.B, raw *pebble.DB, n int) {
	val := qbValue(qbItems(1)[0])
	var key []byte
	for seq := 1; seq <= n; seq += 1000 {
		batch := raw.NewBatch()
		for s := seq; s < seq+1000 && s <= n; s++ {
			key = qbKey(key[:0], int64(s))
			require.NoError(b, batch.Set(key, val, nil))
		}
		require.NoError(b, batch.Commit(pebble.NoSync))
	}
}

// qbReceiveAckFloor returns the floor of a Receive(n)+Ack on raw: one
// bounded iteration reading n values from the tracked head, a commit of n
// Sets (the attempt counts a Receive must write) and a commit of n
// Deletes.
func qbReceiveAckFloor(b *testing.B, raw *pebble.DB, n int) func() {
	head := int64(1)
	var lo, hi, val []byte
	keys := make([][]byte, n)
	return func() {
		lo, hi = qbKey(lo[:0], head), qbKey(hi[:0], head+int64(n))
		it, err := raw.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			b.Fatal(err)
		}
		set := raw.NewBatch()
		i := 0
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				b.Fatal(err)
			}
			h, payload, err := queuefmt.ParseHeader(v, queuefmt.ItemFormat)
			if err != nil {
				b.Fatal(err)
			}
			h.Attempts++
			val = append(queuefmt.AppendHeader(val[:0], queuefmt.ItemFormat, h), payload...)
			keys[i] = append(keys[i][:0], it.Key()...)
			if err := set.Set(keys[i], val, nil); err != nil {
				b.Fatal(err)
			}
			i++
		}
		if err := it.Close(); err != nil || i != n {
			b.Fatalf("read %d, %v", i, err)
		}
		if err := set.Commit(pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		_ = set.Close()
		del := raw.NewBatch()
		for _, k := range keys {
			if err := del.Delete(k, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := del.Commit(pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		_ = del.Close()
		head += int64(n)
	}
}

// qbPebbleSeparated is qbPebble with Pebble's default span policy: the
// value of every key but the first of a prefix in value blocks.
func qbPebbleSeparated(b testing.TB, dir string) *pebble.DB {
	b.Helper()
	cache := pebble.NewCache(128 << 20)
	defer cache.Unref()
	opts := pebblestore.Options(pebblestore.Config{MemTableSize: 16 << 20}, cache)
	opts.Experimental.SpanPolicyFunc = nil
	opts.Logger = qbQuiet{}
	db, err := pebble.Open(dir, opts)
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// queue.Open, the first in a process, of a queue holding 1,000,000 live
// messages: with the state key as this version writes it; with a
// straggler (a message received and never acked at the head, 200,000
// consumed behind it); and with the state key rewritten as versions before
// the count wrote it (tag 0x01), which makes Open walk every message. The
// DB opens outside the timer; each iteration opens it again, so every
// queue.Open is a first one, on a cold cache. ms/open is the figure.
func BenchmarkQueueOpen(b *testing.B) {
	const live = 1_000_000
	for _, variant := range []string{"counted", "straggler", "legacy"} {
		b.Run(fmt.Sprintf("live=%d,state=%s", live, variant), func(b *testing.B) {
			dir := b.TempDir()
			db, q := qbOpen(b, dir, &tipkv.Options{NoSync: true})
			switch variant {
			case "straggler":
				qbEnqueue(b, db, q, live+200_000)
				ms, err := q.Receive(1, time.Hour) // never acked
				require.NoError(b, err)
				require.Len(b, ms, 1)
				for left := 200_000 - 1; left > 0; {
					ms, err := q.Receive(min(left, 100), time.Hour)
					require.NoError(b, err)
					require.NoError(b, q.Ack(db, qbIDs(ms)...))
					left -= len(ms)
				}
			default:
				qbEnqueue(b, db, q, live)
			}
			want := q.Len()
			require.NoError(b, db.Close()) // stores the queue's state
			if variant == "legacy" {
				// Rewritten as a version without counts wrote it, with no
				// queue open (whose Close would store a count again).
				db, err := tipkv.Open(dir, &tipkv.Options{NoSync: true})
				require.NoError(b, err)
				st := storedState(b, db, "bench")
				require.NoError(b, db.Update(func(batch *tipkv.Batch) error {
					return link.Write(batch, func(tx *link.Tx) error {
						return tx.Batch.Set(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "bench"),
							queuefmt.AppendState(nil, queuefmt.State{Head: st.Head, Tail: st.Tail}))
					})
				}))
				require.NoError(b, db.Close())
			}
			var total, first time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				db, err := tipkv.Open(dir, &tipkv.Options{NoSync: true})
				require.NoError(b, err)
				b.StartTimer()
				start := time.Now()
				q, err := queue.Open(db, "bench", &queue.Options[[]byte]{Codec: codec.Raw{}})
				total += time.Since(start)
				b.StopTimer()
				require.NoError(b, err)
				require.Equal(b, want, q.Len())
				// The first Receive after Open starts at the oldest message;
				// with a straggler there it then steps over the consumed
				// messages behind it, once.
				start = time.Now()
				ms, err := q.Receive(2, time.Hour)
				first += time.Since(start)
				require.NoError(b, err)
				require.Len(b, ms, 2)
				require.NoError(b, db.Close())
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/open")
			b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "ms/first-receive-2")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %d live messages, stored state %+v", variant, want, storedQueueStateDir(b, dir, "bench"))
		})
	}
}

func storedQueueStateDir(b testing.TB, dir, name string) queuefmt.State {
	db, err := tipkv.Open(dir, &tipkv.Options{ReadOnly: true})
	require.NoError(b, err)
	defer db.Close()
	return storedState(b, db, name)
}

var (
	churnDisk     = flag.Int("queue.churndisk", 0, "run TestQueueChurnDisk with this many enqueue+pop cycles (1000000 for BENCHMARKS.md)")
	churnMemTable = flag.Uint64("queue.memtable", 0, "Options.MemTableSize for TestQueueChurnDisk (0: the default)")
)

// The peer comparison's churn row (bench/, "churn"), alone and quicker:
// 1,000 live messages, then cycles of Enqueue of one message and Pop(1),
// NoSync (the row syncs; the files on disk are the same), on disk. It logs
// the directory's size (what the row measures: every file) at the end and
// its largest along the way, sampled every 1% of the run, and the flushes
// the run cost. Run:
//
//	go test ./queue -run TestQueueChurnDisk -queue.churndisk 1000000 -queue.memtable 4194304 -v
func TestQueueChurnDisk(t *testing.T) {
	if *churnDisk == 0 {
		t.Skip("run with -queue.churndisk 1000000")
	}
	dir := t.TempDir()
	db, q := qbOpen(t, dir, &tipkv.Options{NoSync: true, MemTableSize: *churnMemTable})
	items := qbItems(1000)
	push(t, db, q, items...)
	var maxSize int64
	sample := max(*churnDisk/100, 1)
	start := time.Now()
	for c := range *churnDisk {
		push(t, db, q, items[c%1000])
		ms, err := q.Pop(1)
		require.NoError(t, err)
		require.Len(t, ms, 1)
		if (c+1)%sample == 0 {
			maxSize = max(maxSize, qbDirSize(t, dir))
		}
	}
	elapsed := time.Since(start)
	end := qbDirSize(t, dir)
	m, err := db.Metrics()
	require.NoError(t, err)
	t.Logf("MemTableSize %d MiB: %d cycles in %v (%.1f us/cycle); disk %.1f MiB at the end, %.1f MiB at most; %d flushes (one per %.0f cycles), %d compactions; WAL %.1f MiB on disk",
		cmp.Or(*churnMemTable, 16<<20)>>20, *churnDisk, elapsed.Round(time.Millisecond), float64(elapsed.Microseconds())/float64(*churnDisk),
		float64(end)/(1<<20), float64(maxSize)/(1<<20), m.Storage.Flushes, float64(*churnDisk)/float64(max(m.Storage.Flushes, 1)),
		m.Storage.Compactions, float64(m.Storage.WALPhysicalSize)/(1<<20))
}

// qbDirSize is the size of every file under dir, as the peer comparison
// counts it.
func qbDirSize(t testing.TB, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	require.NoError(t, err)
	return total
}
