package tipkv_test

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
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
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

// killChild writes Updates of five keys each and prints "ack N" after
// Update N returns, until it is killed.
func killChild(dir string) {
	db, err := tipkv.Open(dir, nil)
	if err != nil {
		fmt.Println("open error:", err)
		os.Exit(3)
	}
	start, _ := strconv.Atoi(os.Getenv("TIPKV_KILL_CHILD_START"))
	for i := start; ; i++ {
		err := db.Update(func(b *tipkv.Batch) error {
			for k := range 5 {
				if err := put(b, fmt.Sprintf("\x06%08d-%d", i, k), strings.Repeat("v", 100)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			fmt.Println("update error:", err)
			os.Exit(4)
		}
		fmt.Printf("ack %d\n", i)
	}
}

// A real process killed with SIGKILL mid-write, several times over the same
// directory: every acknowledged (synced) Update survives whole, no Update is
// partial, and the store reopens each time.
func TestKillDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	next := 0
	for round := range 3 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir, "TIPKV_KILL_CHILD_START="+strconv.Itoa(next))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lastAck := -1
		acks := make(chan int)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if n, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
					i, _ := strconv.Atoi(n)
					acks <- i
				}
			}
			close(acks)
		}()
		deadline := time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond)
	loop:
		for {
			select {
			case i, ok := <-acks:
				if !ok {
					break loop
				}
				lastAck = i
			case <-deadline:
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				for i := range acks { // drain what was printed before the kill
					lastAck = i
				}
				break loop
			}
		}
		_ = cmd.Wait()
		require.GreaterOrEqual(t, lastAck, next, "round %d: the child acknowledged nothing", round)

		db, err := tipkv.Open(dir, nil)
		require.NoError(t, err, "round %d: reopen after SIGKILL", round)
		s, _ := link.Store(db)
		counts := map[int]int{}
		it, err := s.NewIter([]byte{0x06}, []byte{0x07})
		require.NoError(t, err)
		for ok := it.First(); ok; ok = it.Next() {
			var i, k int
			_, err := fmt.Sscanf(string(it.Key()[1:]), "%08d-%d", &i, &k)
			require.NoError(t, err)
			counts[i]++
		}
		require.NoError(t, it.Close())
		require.NoError(t, db.Close())
		top := len(counts) // updates 0..top-1 must all be whole
		for i := range top {
			require.Equal(t, 5, counts[i], "round %d: update %d partial or missing", round, i)
		}
		require.Greater(t, top, lastAck, "round %d: acknowledged update %d lost (store has %d)", round, lastAck, top)
		t.Logf("round %d: %d updates acknowledged, %d survived", round, lastAck+1, top)
		next = top
	}
}
