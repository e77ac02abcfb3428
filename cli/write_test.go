package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

func TestCompact(t *testing.T) {
	dir := compactStore(t)
	var out, errOut strings.Builder
	code := run([]string{"compact", dir}, &out, &errOut, nil)
	require.Equal(t, exitOK, code, errOut.String())
	require.Regexp(t, `^compacted .+ in \S+: [\d.]+ [KM]?i?B -> [\d.]+ [KM]?i?B on disk, 1 -> 0 tombstones in sstables\n$`, out.String())
	progress := errOut.String()
	require.Regexp(t, `^compacting .+: [\d.]+ [KM]?i?B on disk\n`, progress)
	names := []string{"meta", "versions", "queue-items", "queue-state", "feed", "dead-letters", "feed-cursors", "once", "once-due", "once-seqs", "feed-leases", "purges", "queue-control", "time-index", "other"}
	for i, name := range names {
		require.Regexp(t, fmt.Sprintf(`(?m)^  %d/%d `, i+1, len(names))+name+` +[\d.]+ [KM]?i?B  done in \S+$`, progress)
	}

	m := jsonOf(t, cliOKStderr(t, "compact", "--json", dir))
	require.Positive(t, m["disk_before"])
	require.EqualValues(t, 0, m["tombstones_after"])
	require.Len(t, m["steps"], len(names))

	// The range tombstone and what it covered are gone; the store reads back.
	st := jsonOf(t, cliOK(t, "stats", "--json", dir))
	lsm := st["lsm"].(map[string]any)
	require.EqualValues(t, 0, lsm["range_tombstones"])
	require.EqualValues(t, 12, st["keys"])
	cliOK(t, "check", dir)
}

// cliOKStderr runs a command that reports progress on stderr and returns
// its stdout.
func cliOKStderr(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := cli(t, args...)
	require.Equal(t, exitOK, code, errOut)
	return out
}

// The real binary, against a store that this test process holds open: a
// sentence on stderr, exit status 2, no stack trace.
func TestBinaryStoreInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tipkvBinary(t)
	dir := sample(t)
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	for _, args := range [][]string{{"stats", dir}, {"compact", dir}, {"queue", dir, "jobs", "--requeue", "all"}} {
		cmd := exec.Command(bin, args...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v", args)
		require.Equal(t, exitUsage, exit.ExitCode())
		require.Empty(t, out.String())
		require.Equal(t, "tipkv "+args[0]+": "+dir+": the store is in use by another process (Pebble opens a store in one process at a time); stop that process and try again, or read a copy: the service makes one while it runs with DB.Checkpoint, or mounts package console to show its store live\n", errOut.String())
	}
	require.NoError(t, db.Close())

	out, err := exec.Command(bin, "check", dir).Output()
	require.NoError(t, err, "once the other process lets go, the store opens")
	require.Contains(t, string(out), "healthy")
}

// A long compaction step says it is still at work.
func TestCompactTicker(t *testing.T) {
	defer func(d time.Duration) { knobs.tickEvery = d }(knobs.tickEvery)
	knobs.tickEvery = time.Millisecond
	var errOut strings.Builder
	stop := ticker(&ctx{cmd: compactCommand, stderr: &errOut}, "versions", time.Now())
	time.Sleep(20 * time.Millisecond)
	stop()
	n := strings.Count(errOut.String(), "still compacting versions")
	require.Positive(t, n)
	time.Sleep(5 * time.Millisecond)
	require.Equal(t, n, strings.Count(errOut.String(), "still compacting versions"), "nothing after stop")
}

// filesSize is what the regular files in dir take on disk (onDisk: their
// blocks, as du counts them, where the system says).
func filesSize(t *testing.T, dir string) uint64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var n uint64
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		if fi.Mode().IsRegular() {
			n += onDisk(fi)
		}
	}
	return n
}

// The size compact reports after is what is on disk when it returns: the
// files the compaction made obsolete are deleted by then, and not counted.
// (It reported Pebble's usage with them, 254 KiB for the 5 KiB left here.)
// Both figures are the store's files as du counts them.
func TestCompactSizeAfterObsoleteFilesGo(t *testing.T) {
	dir := writeStore(t, func(db *tipkv.DB) {
		for v := int64(1); v <= 3000; v++ {
			set(t, db, vkey("c", "d", v), mp(t, strings.Repeat("x", 1000)))
		}
		require.NoError(t, db.Compact())
		s, err := linkStore(db)
		require.NoError(t, err)
		b := s.NewBatch()
		require.NoError(t, b.DeleteRange(vkey("c", "d", 2990), vkey("c", "d", 0)))
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
	})
	m := jsonOf(t, cliOKStderr(t, "compact", "--json", dir))
	before, after := uint64(m["disk_before"].(float64)), uint64(m["disk_after"].(float64))
	onDisk := filesSize(t, dir)
	t.Logf("reported %d -> %d; files after: %d", before, after, onDisk)
	require.Less(t, after, before/4, "the versions are gone")
	require.Equal(t, onDisk, after, "what is on disk, no more and no less")

	st := jsonOf(t, cliOK(t, "stats", "--json", dir))
	require.EqualValues(t, after, st["disk_usage"], "stats agrees")
}

// childEnv, set in a process's environment, makes this test binary run
// as the tipkv command (TestMain): tests that need a real process run it.
const childEnv = "TIPKV_CLI_TEST_AS_COMMAND"

// tipkvBinary returns the path of a binary that runs as the tipkv command
// (Main, Pebble directories only): this test binary, which TestMain turns
// into the command in a child whose environment says so. Every process
// the test starts from now on inherits that environment; only this
// binary reads it.
func tipkvBinary(t *testing.T) string {
	t.Helper()
	require.NoError(t, os.Setenv(childEnv, "1"))
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr, nil))
	}
	os.Exit(m.Run())
}

// compactCorrupt runs compact on a store whose newest tables overlap in
// L0 (written with automatic compactions off, so that a compaction must
// merge them) and the older of the two has a flipped byte in its first
// data block. It returns the damaged table's path and compact's output.
func compactCorrupt(t *testing.T, args ...string) (bad, stdout, stderr string, code int) {
	t.Helper()
	dir := writeStore(t, func(db *tipkv.DB) {
		set(t, db, vkey("c", "other", 1), mp(t, "kept"))
	})
	cache := pebble.NewCache(1 << 20)
	defer cache.Unref()
	opts := pebblestore.Options(pebblestore.Config{}, cache)
	opts.DisableAutomaticCompactions = true
	db, err := pebble.Open(dir, opts)
	require.NoError(t, err)
	var tables []string
	for parity := range 2 {
		b := db.NewBatch()
		for v := int64(1 + parity); v <= 2000; v += 2 {
			require.NoError(t, b.Set(vkey("c", "d", v), mp(t, fmt.Sprintf("%x", v*v*v*7919)), nil))
		}
		require.NoError(t, b.Commit(pebble.Sync))
		require.NoError(t, db.Flush())
		ssts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
		require.NoError(t, err)
		sort.Strings(ssts)
		tables = append(tables, ssts[len(ssts)-1])
	}
	require.NoError(t, db.Close())
	bad = tables[0]
	b, err := os.ReadFile(bad)
	require.NoError(t, err)
	b[40] ^= 0x5a // inside the first data block
	require.NoError(t, os.WriteFile(bad, b, 0o644))

	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := cli(t, append(args, dir)...)
		done <- result{out, errOut, code}
	}()
	select {
	case r := <-done:
		return bad, r.out, r.errOut, r.code
	case <-time.After(2 * time.Minute): // a guard against a hang, not a window
		t.Fatal("compact of a store with a corrupt table still runs after two minutes")
		return
	}
}

// A compaction that meets a corrupt table stops compact with exit status 1
// and an error that names the table; Pebble used to retry the compaction
// for ever, and compact never returned. The store still opens and reads
// what is not in the table.
func TestCompactCorruptTable(t *testing.T) {
	bad, out, errOut, code := compactCorrupt(t, "compact")
	require.Equal(t, exitFail, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Empty(t, out)
	require.Regexp(t, `(?m)^tipkv compact: compact \S+: tipkv: corrupt data: .*`+regexp.QuoteMeta(filepath.Base(bad)), errOut)

	_, out, errOut, code = compactCorrupt(t, "compact", "--json")
	require.Equal(t, exitFail, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	lines := strings.Split(strings.TrimSpace(errOut), "\n") // progress, then the error
	e := jsonOf(t, lines[len(lines)-1])
	require.Equal(t, "corrupt", e["kind"])
	require.Contains(t, e["error"], filepath.Base(bad))
}
