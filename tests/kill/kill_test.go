package kill_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/tests/internal/workload"
)

// killChildEnv tells the test binary it is the child of TestKillDuringWrites.
const killChildEnv = "TIPKV_KILL_CHILD_DIR"

// TestMain runs the test binary as the child of TestKillDuringWrites when
// killChildEnv is set.
func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
	}
	os.Exit(m.Run())
}

// killChild runs the crash workload on dir with synced writes, printing
// each operation's log line, until it is killed.
func killChild(dir string) {
	fail := func(what string, err error) {
		fmt.Printf("child %s: %v\n", what, err)
		os.Exit(3)
	}
	seed, _ := strconv.ParseUint(os.Getenv("TIPKV_KILL_CHILD_SEED"), 10, 64)
	start, _ := strconv.ParseInt(os.Getenv("TIPKV_KILL_CHILD_START"), 10, 64)
	db, err := tipkv.Open(dir, nil)
	if err != nil {
		fail("open", err)
	}
	w, err := workload.New(db, rand.New(rand.NewPCG(seed, 2)), start, func(l string) { fmt.Println(l) })
	if err != nil {
		fail("workload", err)
	}
	for {
		if err := w.Step(); err != nil {
			fail("step", err)
		}
	}
}

// A real process running the mixed workload with synced writes, killed
// with SIGKILL at a random point of its progress, three times over one
// directory: after each kill the store reopens, every acknowledged write is
// there, versions are dense, outbox batches are whole and no message is
// lost.
//
// The kill waits for progress, never for time: the parent reads the
// child's log as it is written and kills it once the child has logged a
// random number of acknowledged operations. A busy machine makes the round
// slower, never different.
func TestKillDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var lines []string
	for round := range 3 {
		target := killMinAcked + rng.IntN(killMaxAcked-killMinAcked+1)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir,
			"TIPKV_KILL_CHILD_SEED="+strconv.FormatUint(rng.Uint64(), 10),
			"TIPKV_KILL_CHILD_START="+strconv.Itoa((round+1)<<32))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		before := len(lines)
		sc := bufio.NewScanner(out)
		acked, killed := 0, false
		for sc.Scan() { // until the child's stdout closes: killed, or failed
			l := sc.Text()
			lines = append(lines, l)
			if !strings.HasPrefix(l, "try ") {
				acked++
			}
			if acked == target && !killed {
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				killed = true // keep reading what was printed before the kill
			}
		}
		_ = cmd.Wait()
		for _, l := range lines[before:] {
			require.NotContains(t, l, "child ", "the child failed")
		}
		require.True(t, killed, "round %d: the child stopped after %d acknowledged operations, before the kill at %d", round, acked, target)

		db, err := tipkv.Open(dir, nil)
		require.NoError(t, err, "round %d: reopen after SIGKILL", round)
		a, err := workload.ParseLog(lines)
		require.NoError(t, err)
		require.NoError(t, a.Check(db, true), "round %d after SIGKILL", round)
		require.NoError(t, db.Close())
		t.Logf("round %d: killed after %d acknowledged operations; %d lines logged in all, store checked", round, target, len(lines)-before)
	}
}

// A kill lands after this many acknowledged operations of the child, drawn
// uniformly in [killMinAcked, killMaxAcked].
const (
	killMinAcked = 10
	killMaxAcked = 200
)
