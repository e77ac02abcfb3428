package versioned_test

import (
	"bufio"
	"context"
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
	"github.com/tipkv/tipkv/versioned"
)

// groupsChildEnv tells the test binary it is the child of
// TestGroupsKilledAndRestarted, and where its store is.
const groupsChildEnv = "TIPKV_GROUPS_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(groupsChildEnv); dir != "" {
		groupsChild(dir)
	}
	os.Exit(m.Run())
}

type pos struct {
	P int64 `msgpack:"p"`
}

// groupsChild appends to stream "s" and runs two consumer groups, "a" and
// "b", each projecting "s" into the stream "proj-"+group and advancing its
// cursor in the same Update, until it is killed. It prints "given g p"
// when a follower is given an event and "done g p" once the Update of
// its projection has returned.
func groupsChild(dir string) {
	fail := func(what string, err error) {
		fmt.Printf("child %s: %v\n", what, err)
		os.Exit(3)
	}
	db, err := tipkv.Open(dir, nil)
	if err != nil {
		fail("open", err)
	}
	f, err := versioned.NewFeed[pos](db, nil)
	if err != nil {
		fail("feed", err)
	}
	out := make(chan string, 64)
	for _, g := range []string{"a", "b"} {
		go func() {
			cur, err := f.Cursor("s", g)
			if err != nil {
				fail("cursor", err)
			}
			for e, err := range f.Follow(context.Background(), "s", cur) {
				if err != nil {
					fail("follow", err)
				}
				out <- fmt.Sprintf("given %s %d", g, e.Position)
				err := db.Update(func(tx *tipkv.Batch) error {
					if _, err := f.Append(tx, "proj-"+g, pos{e.Position}); err != nil {
						return err
					}
					return f.Advance(tx, "s", g, cur, e.Position)
				})
				if err != nil {
					fail("project", err)
				}
				cur = e.Position
				out <- fmt.Sprintf("done %s %d", g, e.Position)
			}
		}()
	}
	go func() {
		for {
			if err := db.Update(func(tx *tipkv.Batch) error {
				for range 1 + rand.IntN(3) {
					if _, err := f.Append(tx, "s", pos{}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				fail("append", err)
			}
		}
	}()
	for l := range out {
		fmt.Println(l)
	}
}

// Two consumer groups project one stream, each advancing its cursor in
// the Update that writes its projection, in a real process killed with
// SIGKILL at a random point of its progress, three times over one store:
// after each kill, each projection holds exactly the stream's events up
// to its group's cursor, once each, in order, and every event a follower
// was given is still in the stream.
func TestGroupsKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var lastA, lastB int64
	for round := range 3 {
		target := 20 + rng.IntN(400)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), groupsChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(stdout)
		given := map[int64]bool{}
		done, killed := 0, false
		for sc.Scan() {
			l := sc.Text()
			require.False(t, strings.HasPrefix(l, "child "), "the child failed: %s", l)
			fs := strings.Fields(l)
			require.Len(t, fs, 3, l)
			p, err := strconv.ParseInt(fs[2], 10, 64)
			require.NoError(t, err)
			if fs[0] == "given" {
				given[p] = true
			} else if done++; done == target && !killed {
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				killed = true
			}
		}
		_ = cmd.Wait()
		require.True(t, killed, "round %d: the child stopped before the kill", round)

		db, err := tipkv.Open(dir, nil)
		require.NoError(t, err, "round %d: reopen after SIGKILL", round)
		f, err := versioned.NewFeed[pos](db, nil)
		require.NoError(t, err)
		stream := map[int64]bool{}
		var events []int64
		for e, err := range f.Since("s", 0, tipkv.Query{Limit: 1 << 30}) {
			require.NoError(t, err)
			stream[e.Position] = true
			events = append(events, e.Position)
		}
		for p := range given {
			require.True(t, stream[p], "round %d: event %d was given to a follower and is gone", round, p)
		}
		for _, g := range []string{"a", "b"} {
			cur, err := f.Cursor("s", g)
			require.NoError(t, err)
			var want, got []int64
			for _, p := range events {
				if p <= cur {
					want = append(want, p)
				}
			}
			for e, err := range f.Since("proj-"+g, 0, tipkv.Query{Limit: 1 << 30}) {
				require.NoError(t, err)
				got = append(got, e.Value.P)
			}
			require.Equal(t, want, got, "round %d: group %s's projection is the stream up to its cursor %d, each event once", round, g, cur)
			if g == "a" {
				require.GreaterOrEqual(t, cur, lastA)
				lastA = cur
			} else {
				require.GreaterOrEqual(t, cur, lastB)
				lastB = cur
			}
		}
		require.NoError(t, db.Close())
		t.Logf("round %d: killed after %d projected events; %d events in the stream, cursors a=%d b=%d", round, target, len(events), lastA, lastB)
	}
}
