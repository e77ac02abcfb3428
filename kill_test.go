package tipkv_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
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
	w, err := newWorkload(db, rand.New(rand.NewPCG(seed, 2)), start, func(l string) { fmt.Println(l) })
	if err != nil {
		fail("workload", err)
	}
	for {
		if err := w.step(); err != nil {
			fail("step", err)
		}
	}
}

// A real process running the mixed workload with synced writes, killed
// with SIGKILL at a random moment, three times over one directory: after
// each kill the store reopens, every acknowledged write is there, versions
// are dense, outbox batches are whole and no message is lost.
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
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir,
			"TIPKV_KILL_CHILD_SEED="+strconv.FormatUint(rng.Uint64(), 10),
			"TIPKV_KILL_CHILD_START="+strconv.Itoa((round+1)<<32))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		got := make(chan string)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				got <- sc.Text()
			}
			close(got)
		}()
		before := len(lines)
		deadline := time.After(time.Duration(200+rng.IntN(400)) * time.Millisecond)
	loop:
		for {
			select {
			case l, ok := <-got:
				if !ok {
					break loop
				}
				lines = append(lines, l)
			case <-deadline:
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				for l := range got { // what was printed before the kill
					lines = append(lines, l)
				}
				break loop
			}
		}
		_ = cmd.Wait()
		for _, l := range lines[before:] {
			require.NotContains(t, l, "child ", "the child failed")
		}
		require.Greater(t, len(lines), before+10, "round %d: the child did almost nothing", round)

		db, err := tipkv.Open(dir, nil)
		require.NoError(t, err, "round %d: reopen after SIGKILL", round)
		a, err := parseLog(lines)
		require.NoError(t, err)
		require.NoError(t, a.check(db, true), "round %d after SIGKILL", round)
		require.NoError(t, db.Close())
		t.Logf("round %d: %d operations logged, store checked", round, len(lines)-before)
	}
}
