package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// item is what the checkpoint test's writers write: its sequence number in
// its writer, from 1.
type item struct {
	N       int    `msgpack:"n"`
	Version int64  `msgpack:"version,omitempty"`
	Pad     []byte `msgpack:"pad,omitempty"` // so that memtables fill and flush during the test
}

// progress counts a writer's operations: started before each one begins,
// acked after it returned nil. A checkpoint holds a prefix of the writer's
// operations: all those acked before it was taken, none started after.
type progress struct{ started, acked atomic.Int64 }

// Writers write documents, feed events, queue messages and outbox pairs
// (a document version and its message in one Update) without pause while
// checkpoints are taken. Each checkpoint opens as a store, holds for each
// writer a prefix of its operations that includes every operation
// acknowledged before the checkpoint began, has every outbox pair whole,
// and passes tipkv check.
func TestCheckpointWhileWriting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "live")
	db, err := tipkv.Open(dir, &tipkv.Options{MemTableSize: 256 << 10, CacheSize: 8 << 20})
	require.NoError(t, err)
	defer db.Close()
	docs, err := versioned.NewCollection[item](db, "docs", nil)
	require.NoError(t, err)
	orders, err := versioned.NewCollection[item](db, "orders", nil)
	require.NoError(t, err)
	feed, err := versioned.NewFeed[item](db, nil)
	require.NoError(t, err)
	jobs, err := queue.Open[item](db, "jobs", nil)
	require.NoError(t, err)
	outbox, err := queue.Open[item](db, "outbox", nil)
	require.NoError(t, err)

	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	pad := make([]byte, 4<<10)
	ops := map[string]func(n int) error{
		"doc": func(n int) error {
			_, err := docs.Put(db, "d", item{N: n, Pad: pad})
			return err
		},
		"feed": func(n int) error {
			_, err := feed.AppendAt(db, "s", t0.Add(time.Duration(n)*time.Millisecond), item{N: n, Pad: pad})
			return err
		},
		"queue": func(n int) error { _, err := jobs.Enqueue(db, item{N: n, Pad: pad}); return err },
		"outbox": func(n int) error {
			return db.Update(func(b *tipkv.Batch) error {
				v, err := orders.Put(b, "o", item{N: n, Pad: pad})
				if err != nil {
					return err
				}
				_, err = outbox.Enqueue(b, item{N: n, Version: v})
				return err
			})
		},
	}
	prog := map[string]*progress{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(ops))
	for name, op := range ops {
		p := &progress{}
		prog[name] = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				p.started.Store(int64(n))
				if err := op(n); err != nil {
					errs <- fmt.Errorf("%s %d: %w", name, n, err)
					return
				}
				p.acked.Store(int64(n))
			}
		}()
	}
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWriters()

	// waitFor waits until every writer has acknowledged more than min[w]
	// operations: progress, not time.
	waitFor := func(min map[string]int64) {
		for {
			done := true
			for name, p := range prog {
				done = done && p.acked.Load() > min[name]
			}
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			if done {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}

	type bounds struct{ lo, hi map[string]int64 }
	var copies []string
	var want []bounds
	last := map[string]int64{}
	for i := range 6 {
		waitFor(last)
		b := bounds{lo: map[string]int64{}, hi: map[string]int64{}}
		for name, p := range prog {
			b.lo[name] = p.acked.Load()
		}
		dest := filepath.Join(t.TempDir(), fmt.Sprintf("copy-%d", i))
		require.NoError(t, db.Checkpoint(dest))
		for name, p := range prog {
			b.hi[name] = p.started.Load()
		}
		copies, want = append(copies, dest), append(want, b)
		for name := range prog {
			last[name] = b.hi[name] + 10 // the next checkpoint after more writes
		}
	}
	stopWriters()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	m, err := db.Metrics()
	require.NoError(t, err)
	require.Positive(t, m.Storage.Flushes, "memtables were flushed while checkpoints were taken: copies hold tables and logs")

	for i, dest := range copies {
		got := readCopy(t, dest)
		for name := range prog {
			n := got[name]
			require.True(t, want[i].lo[name] <= n && n <= want[i].hi[name],
				"checkpoint %d, %s: holds %d operations; %d were acknowledged before it began and %d started before it ended", i, name, n, want[i].lo[name], want[i].hi[name])
		}
		out := cliOK(t, "check", dest)
		require.Contains(t, out, "healthy", "checkpoint %d", i)
		t.Logf("checkpoint %d: %v (acknowledged before: %v), %d tables", i, got, want[i].lo, tables(t, dest))
	}
}

// readCopy opens the checkpoint in dest read-only, checks that each
// writer's operations in it are 1..n with no gap, that the outbox holds a
// message for each order version and no other, and returns n per writer.
func readCopy(t *testing.T, dest string) map[string]int64 {
	t.Helper()
	db, err := tipkv.Open(dest, &tipkv.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	got := map[string]int64{}

	versions := func(coll, id string) int64 {
		c, err := versioned.NewCollection[item](db, coll, nil)
		require.NoError(t, err)
		var n, next int64
		for d, err := range c.History(id, tipkv.Query{}) {
			require.NoError(t, err)
			if n == 0 {
				n, next = d.Version, d.Version
			}
			require.Equal(t, next, d.Version, "%s/%s: versions 1..n, newest first", coll, id)
			require.EqualValues(t, d.Version, d.Value.N, "%s/%s: version %d holds the write it was given", coll, id, d.Version)
			next--
		}
		require.Zero(t, next, "%s/%s: versions down to 1", coll, id)
		return n
	}
	got["doc"] = versions("docs", "d")
	got["outbox"] = versions("orders", "o")

	feed, err := versioned.NewFeed[item](db, nil)
	require.NoError(t, err)
	var events []int
	for e, err := range feed.Newest("s", tipkv.Query{}) {
		require.NoError(t, err)
		events = append(events, e.Value.N)
	}
	for i, n := range events {
		require.Equal(t, len(events)-i, n, "the feed holds events 1..n, newest first")
	}
	got["feed"] = int64(len(events))

	messages := func(name string) []item {
		q, err := queue.Open[item](db, name, nil)
		if errors.Is(err, tipkv.ErrNotFound) {
			return nil
		}
		require.NoError(t, err)
		n := q.Stats().Len
		if n == 0 {
			return nil
		}
		msgs, err := q.Peek(n)
		require.NoError(t, err)
		var out []item
		for i, m := range msgs {
			require.Equal(t, i+1, m.Value.N, "queue %s holds messages 1..n in order", name)
			out = append(out, m.Value)
		}
		return out
	}
	got["queue"] = int64(len(messages("jobs")))
	box := messages("outbox")
	require.Len(t, box, int(got["outbox"]), "an outbox message for every order version, and none without its version")
	for _, m := range box {
		require.EqualValues(t, m.N, m.Version)
	}
	return got
}

func TestBackupCommand(t *testing.T) {
	dir := realStore(t)
	dest := filepath.Join(t.TempDir(), "copy")
	out := cliOK(t, "backup", dir, dest)
	require.Contains(t, out, "backed up")
	orig, cp := jsonOf(t, cliOK(t, "stats", "--json", dir)), jsonOf(t, cliOK(t, "stats", "--json", dest))
	for _, k := range []string{"keys", "families", "collections", "streams", "queues"} {
		require.Equal(t, orig[k], cp[k], k)
	}
	require.Contains(t, cliOK(t, "check", dest), "healthy")

	// JSON, then refusals: DEST not empty, DIR in use.
	dest2 := filepath.Join(t.TempDir(), "copy")
	m := jsonOf(t, cliOK(t, "backup", "--json", dir, dest2))
	require.Equal(t, dest2, m["dest"])
	require.Positive(t, m["files"])
	_, errOut, code := cli(t, "backup", dir, dest)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "not empty")

	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	defer db.Close()
	x := filepath.Join(t.TempDir(), "x")
	_, errOut, code = cli(t, "backup", "--json", dir, x)
	require.Equal(t, exitUsage, code)
	require.Equal(t, kindInUse, jsonOf(t, errOut)["kind"])
	_, err = os.Stat(x)
	require.True(t, os.IsNotExist(err))
}

func tables(t *testing.T, dir string) int {
	m, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NoError(t, err)
	return len(m)
}

// stats shows DB.Metrics' figures; --json has them all, and --no-scan
// skips reading the keys.
func TestStatsMetrics(t *testing.T) {
	dir := realStore(t)
	out := cliOK(t, "stats", dir)
	require.Contains(t, out, "ENGINE pebble")
	require.Contains(t, out, "compaction debt")

	m := jsonOf(t, cliOK(t, "stats", "--json", dir))
	require.Contains(t, m, "keys")
	metrics := m["metrics"].(map[string]any)
	require.Equal(t, "pebble", metrics["engine"])
	storage := metrics["storage"].(map[string]any)
	require.Len(t, storage["levels"], 7)
	for _, k := range []string{"disk_usage", "cache_hit_rate", "tombstones", "compaction_debt", "wal_bytes", "write_stalls", "flushes", "compactions"} {
		require.Contains(t, storage, k)
	}

	quick := jsonOf(t, cliOK(t, "stats", "--json", "--no-scan", dir))
	require.NotContains(t, quick, "keys")
	require.NotContains(t, quick, "families")
	require.Contains(t, quick, "lsm")
	require.Contains(t, quick, "metrics")
	out = cliOK(t, "stats", "--no-scan", dir)
	require.NotContains(t, out, "FAMILY")
	require.Contains(t, out, "ENGINE pebble")
}
