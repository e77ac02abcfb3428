package pebblestore_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// The fault tests run the store in a child process (this test binary run
// again), so that a store that exits the process or lets a panic escape
// shows as a failed test, not as a crashed test binary.
const childEnv = "TIPKV_PEBBLESTORE_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(child(role, os.Getenv("TIPKV_DIR")))
	}
	os.Exit(m.Run())
}

// report is what a child prints, one JSON object per line.
type report struct {
	Event   string `json:"event"`
	Key     int    `json:"key,omitempty"`
	Err     string `json:"err,omitempty"`
	Corrupt bool   `json:"corrupt,omitempty"`
	NoSpace bool   `json:"nospace,omitempty"`
}

func emit(r report) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

func errReport(event string, key int, err error) report {
	return report{Event: event, Key: key, Err: err.Error(),
		Corrupt: errors.Is(err, codec.ErrCorrupt), NoSpace: errors.Is(err, syscall.ENOSPC)}
}

// runChild runs the child role on dir and returns its reports. It fails
// the test if the child did not exit with status 0: Pebble's default
// corruption handler and fatal logger exit with 1, an escaped panic with 2.
func runChild(t *testing.T, role, dir string) []report {
	t.Helper()
	return runChildDeadline(t, role, dir, 0)
}

// runChildDeadline is runChild, except that a child still running after d
// (if d > 0) is sent SIGQUIT, which makes it print its goroutines on
// stderr and exit, and fails the test.
func runChildDeadline(t *testing.T, role, dir string, d time.Duration) []report {
	t.Helper()
	ctx := context.Background()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), childEnv+"="+role, "TIPKV_DIR="+dir)
	// A child must not outlive a test that fails or times out: one left on
	// a full disk spins in Pebble's flush retries.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var rs []report
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r report
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Event != "" {
			rs = append(rs, r)
		}
	}
	require.NoError(t, ctx.Err(), "child %s still ran after %v: it hangs\nstdout:\n%s\nstderr:\n%s", role, d, out, stderr.String())
	require.NoError(t, err, "child %s must exit cleanly, never exit the process or panic\nstdout:\n%s\nstderr:\n%s", role, out, stderr.String())
	require.NotEmpty(t, rs, "the child reported nothing:\n%s", stderr.String())
	return rs
}

func key(i int) []byte {
	return codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "q"), int64(i))
}

const perTable = 500

// child is the body of a child process.
func child(role, dir string) int {
	switch role {
	case "read-all":
		s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20})
		if err != nil {
			emit(errReport("open-error", 0, err))
			return 0
		}
		for i := 1; i <= 2*perTable; i++ {
			if _, err := s.Get(key(i)); err != nil {
				emit(errReport("get-error", i, err))
			} else {
				emit(report{Event: "get-ok", Key: i})
			}
		}
		if err := s.Close(); err != nil {
			emit(errReport("close-error", 0, err))
		}
		emit(report{Event: "done"})
		return 0
	case "compact-corrupt", "compact-corrupt-fill":
		return compactChild(dir, role == "compact-corrupt-fill")
	case "full-disk-wal", "full-disk-flush":
		return fullDiskChild(role, dir)
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 5
}

// writeTables writes 2*perTable keys into two sstables, perTable each.
func writeTables(t *testing.T, dir string) {
	s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20})
	require.NoError(t, err)
	val := bytes.Repeat([]byte("v"), 100)
	for table := range 2 {
		b := s.NewBatch()
		for i := table*perTable + 1; i <= (table+1)*perTable; i++ {
			require.NoError(t, b.Set(key(i), val))
		}
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
		require.NoError(t, s.Flush())
	}
	require.NoError(t, s.Close())
}

// growManifest flushes small tables until the manifest holds size bytes.
func growManifest(t *testing.T, dir string, size int64) {
	s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20})
	require.NoError(t, err)
	for i := 0; ; i++ {
		ms, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
		require.NoError(t, err)
		st, err := os.Stat(ms[len(ms)-1])
		require.NoError(t, err)
		if st.Size() >= size {
			break
		}
		b := s.NewBatch()
		require.NoError(t, b.Set(key(10_000+i), []byte("x")))
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
		require.NoError(t, s.Flush())
	}
	require.NoError(t, s.Close())
}

func tables(t *testing.T, dir string) []string {
	ts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ts), 2, "two flushes, two tables")
	return ts
}

func flip(t *testing.T, path string, at func(size int) int) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[at(len(b))] ^= 0x5a
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// A flipped byte in a table's data: the store opens, reads that meet the
// table fail with ErrCorrupt naming the file, reads of the other table
// succeed, Close returns, and the process lives.
func TestCorruptDataBlock(t *testing.T) {
	dir := t.TempDir()
	writeTables(t, dir)
	bad := tables(t, dir)[0]
	flip(t, bad, func(int) int { return 40 }) // inside the first data block
	rs := runChild(t, "read-all", dir)
	var ok, corrupt int
	for _, r := range rs {
		switch r.Event {
		case "open-error":
			t.Fatalf("a corrupt data block must not stop Open: %s", r.Err)
		case "get-ok":
			ok++
		case "get-error":
			require.True(t, r.Corrupt, "key %d: %s", r.Key, r.Err)
			require.Contains(t, r.Err, filepath.Base(bad), "the error names the file")
			corrupt++
		}
	}
	require.Positive(t, corrupt, "the corrupt table was read")
	require.GreaterOrEqual(t, ok, perTable, "the other table stays readable")
	require.Equal(t, "done", rs[len(rs)-1].Event)
}

// A flipped byte in a table's footer or in the manifest: Open (or the
// first read) fails with ErrCorrupt, and the process lives.
//
// Pebble tells a damaged manifest record from a torn tail only when an
// intact 32 KiB block follows it (its record reader reads ahead), so the
// manifest here is grown past one block first; in a one-block manifest a
// flipped byte reads as a torn tail, and Pebble (and so tipkv) opens the
// store as of the last intact record.
func TestCorruptFooterAndManifest(t *testing.T) {
	for _, kind := range []string{"footer", "manifest"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			writeTables(t, dir)
			path := tables(t, dir)[0]
			at := func(n int) int { return n - 10 }
			if kind == "manifest" {
				growManifest(t, dir, 40<<10)
				ms, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
				require.NoError(t, err)
				path = ms[len(ms)-1] // the current one: Pebble rotates them
				st, err := os.Stat(path)
				require.NoError(t, err)
				require.Greater(t, st.Size(), int64(32<<10))
				at = func(int) int { return 4 << 10 } // in the first block
			}
			flip(t, path, at)
			rs := runChild(t, "read-all", dir)
			corrupt := 0
			for _, r := range rs {
				if strings.HasSuffix(r.Event, "-error") && r.Event != "close-error" {
					require.True(t, r.Corrupt, "%s: %s", r.Event, r.Err)
					corrupt++
				}
			}
			require.Positive(t, corrupt, "the corruption was reported")
		})
	}
}

// diskFull injects ENOSPC into writes while on, into every file (wal) or
// into tables only (flush).
type diskFull struct {
	on     atomic.Bool
	tables bool
}

func (d *diskFull) MaybeError(op errorfs.Op) error {
	if !d.on.Load() {
		return nil
	}
	switch op.Kind {
	case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync,
		errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFilePreallocate, errorfs.OpLink:
		if d.tables && !strings.HasSuffix(op.Path, ".sst") {
			return nil
		}
		return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

func (d *diskFull) String() string { return "disk full" }

func fullDiskChild(role, dir string) int {
	df := &diskFull{tables: role == "full-disk-flush"}
	events := make(chan string, 1024)
	logged := &levelCounts{}
	cfg := pebblestore.Config{FS: errorfs.Wrap(vfs.Default, df), CacheSize: 1 << 20, FormatVersion: 2,
		Events: func(e pebblestore.Event) {
			select {
			case events <- e.Kind:
			default:
			}
		},
		Logger: slog.New(logged)}
	sync := true
	if df.tables {
		cfg.MemTableSize = pebblestore.MinMemTableSize
		sync = false
	}
	s, err := pebblestore.Open(dir, cfg)
	if err != nil {
		emit(errReport("open-error", 0, err))
		return 0
	}
	val := bytes.Repeat([]byte("v"), 200)
	var next atomic.Int64
	write := func() error {
		i := int(next.Add(1))
		b := s.NewBatch()
		defer b.Close()
		err := b.Set(key(i), val)
		if err == nil {
			err = b.Apply(sync)
		}
		if err == nil {
			err = b.Wait()
		}
		if err != nil {
			emit(errReport("write-error", i, err))
		} else {
			emit(report{Event: "ack", Key: i})
		}
		return err
	}
	for range 50 {
		if err := write(); err != nil {
			return 0
		}
	}
	df.on.Store(true)
	emit(report{Event: "disk-full"})
	if !df.tables {
		// The write-ahead log: the write that meets the full disk fails at
		// once, and so do the ones after it.
		for range 3 {
			_ = write()
		}
	} else {
		// Flushes: a writer goes on until a write blocks inside Pebble's
		// stall. The store then refuses new writes at once.
		stop := make(chan struct{})
		writer := make(chan struct{})
		go func() {
			defer close(writer)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if write() != nil {
					return
				}
			}
		}()
		for k := range events {
			if k == "writes-refused" {
				break
			}
		}
		for range 3 {
			_ = write()
		}
		df.on.Store(false)
		emit(report{Event: "space-back"})
		close(stop)
		<-writer // the blocked write completes once a flush succeeds
	}
	df.on.Store(false)
	emit(report{Event: "space-back"})
	// Later writes are errors too, or succeed once space is back: never a
	// hang or a panic.
	for range 20 {
		_ = write()
	}
	if m, err := pebblestore.FiguresOf[level](s); err == nil {
		emit(report{Event: "write-stalls", Key: int(m.WriteStalls)})
		emit(report{Event: "background-errors", Key: int(m.BackgroundErrors)})
	}
	emit(report{Event: "logged-errors", Key: int(logged.errors.Load())})
	if err := s.Close(); err != nil {
		emit(errReport("close-error", 0, err))
	}
	emit(report{Event: "done"})
	return 0
}

// levelCounts is a slog handler that counts the records at Error.
type levelCounts struct {
	errors atomic.Int64
}

func (c *levelCounts) Enabled(context.Context, slog.Level) bool { return true }
func (c *levelCounts) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		c.errors.Add(1)
	}
	return nil
}
func (c *levelCounts) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *levelCounts) WithGroup(string) slog.Handler      { return c }

// A full disk, in the write-ahead log (synced writes) or in flushes
// (small memtable, no sync): the write that meets it fails with an error
// that matches ENOSPC, later writes fail too or succeed once space is back,
// nothing panics or exits, Close returns, and after a reopen every
// acknowledged write is there.
func TestFullDisk(t *testing.T) {
	for _, role := range []string{"full-disk-wal", "full-disk-flush"} {
		t.Run(role, func(t *testing.T) {
			dir := t.TempDir()
			rs := runChild(t, role, dir)
			var acked []int
			full, nospace := false, 0
			counted := map[string]int{}
			for _, r := range rs {
				switch r.Event {
				case "write-stalls", "background-errors", "logged-errors":
					counted[r.Event] = r.Key
				case "open-error":
					t.Fatalf("open: %s", r.Err)
				case "disk-full":
					full = true
				case "space-back":
					full = false
				case "ack":
					acked = append(acked, r.Key)
				case "write-error":
					if full && r.NoSpace {
						nospace++
					}
				}
			}
			require.Positive(t, nospace, "a write met the full disk and said so (ENOSPC)")
			require.Equal(t, "done", rs[len(rs)-1].Event, "the child finished: Close returned")
			if role == "full-disk-flush" {
				// Flushes failed (background errors) until Pebble stopped
				// writes (a stall): the metrics count both, and the logger
				// heard errors.
				require.Positive(t, counted["write-stalls"], "%v", counted)
				require.Positive(t, counted["background-errors"], "%v", counted)
				require.Positive(t, counted["logged-errors"], "%v", counted)
			}

			s, err := pebblestore.Open(dir, pebblestore.Config{CacheSize: 1 << 20, FormatVersion: 2})
			require.NoError(t, err, "the store reopens once the disk has room")
			defer s.Close()
			for _, k := range acked {
				_, err := s.Get(key(k))
				require.NoError(t, err, "acknowledged write %d is lost", k)
			}
			t.Logf("%d writes acknowledged, %d refused with ENOSPC", len(acked), nospace)
		})
	}
}
