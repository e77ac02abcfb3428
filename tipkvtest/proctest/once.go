package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/tipkvtest"
)

// OnceConfig shapes a kill test of idempotency keys (RunOnce). The zero
// value of each field but Child means its default.
type OnceConfig struct {
	// Child is the name of the test function that runs a child: it calls
	// OnceChild and nothing else. Required.
	Child string

	// Env is added to every child's environment: what the child needs to
	// reach the engine.
	Env []string

	// Children is how many children run at once, each a process enqueuing
	// the same keys in the same order, racing one another. Use 1 on an
	// engine one process owns (Pebble). The default is 1.
	Children int

	// Keys is how many keys the children enqueue, k0 to k<Keys-1>. The
	// default is 300.
	Keys int

	// Rounds is how many times the children are started, killed and
	// checked. The default is 3.
	Rounds int
}

func (c OnceConfig) withDefaults() OnceConfig {
	if c.Children <= 0 {
		c.Children = 1
	}
	if c.Keys <= 0 {
		c.Keys = 300
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	return c
}

// onceEnv carries a once child's spec (JSON) in its environment.
const onceEnv = "TIPKV_PROCTEST_ONCE"

// onceSpec is what a once child is told.
type onceSpec struct {
	Keys  int
	First int // the key it starts at
}

// OnceQueue is the queue the children of RunOnce enqueue to.
const OnceQueue = "once"

// onceItem is the content a child enqueues for key k: derived from the
// key, so that every write of a key is the same write.
type onceItem struct {
	Key int `msgpack:"k"`
}

// onceScope is key k's scope: the three scopes in turn. None ends during
// the test: nothing consumes the queue, windows last a day.
func onceScope(k int) tipkv.Scope {
	switch k % 3 {
	case 0:
		return tipkv.UntilDone()
	case 1:
		return tipkv.Window(24 * time.Hour)
	}
	return tipkv.UntilForgotten()
}

// OnceChild is the body of a child process of RunOnce: the test function
// that OnceConfig.Child names calls it and nothing else. In a process
// that RunOnce did not start it skips t. Otherwise it opens a DB with
// open (again while open fails) and enqueues, with EnqueueOnce, key after
// key from its first one on, round and round, half on the DB and half
// inside an Update, reporting each write before it is sent ("TRY k") and
// each acknowledgement ("OK k seq dup"), one write(2) per line, until it
// is killed.
func OnceChild(t *testing.T, open func(ctx context.Context) (*tipkv.DB, error)) {
	raw := os.Getenv(onceEnv)
	if raw == "" {
		t.Skip("a child of a once kill test: proctest.RunOnce runs it")
	}
	var sp onceSpec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		t.Fatalf("proctest: the child's spec %q: %v", raw, err)
	}
	ctx := context.Background()
	var db *tipkv.DB
	for {
		var err error
		if db, err = open(ctx); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer db.Close()
	q, err := queue.Open[onceItem](db, OnceQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := &reporter{w: os.Stdout}
	for k := sp.First; ; k = (k + 1) % sp.Keys {
		key := fmt.Sprint("k", k)
		out.printf("TRY %d", k)
		var seq int64
		var dup bool
		if k%2 == 0 {
			seq, dup, err = q.EnqueueOnce(db, key, onceScope(k), onceItem{Key: k})
		} else {
			err = db.Update(func(b *tipkv.Batch) error {
				var err error
				seq, dup, err = q.EnqueueOnce(b, key, onceScope(k), onceItem{Key: k})
				return err
			})
		}
		if err != nil {
			out.printf("ERR %d %v", k, err)
			t.Fatalf("key %s: %v", key, err)
		}
		out.printf("OK %d %d %v", k, seq, dup)
	}
}

// RunOnce is a kill test of writes guarded by idempotency keys. It starts
// cfg.Children children (OnceChild), which enqueue keys k0, k1, ... with
// EnqueueOnce, kills every one with SIGKILL once they have reported a
// random number of acknowledged writes (so in the middle of one, as far
// as the parent can tell), opens a DB with open (on Pebble, the same
// directory; on a shared engine, a new handle), and checks, then closes
// it; cfg.Rounds times over one store. The check:
//
//   - every acknowledged key holds its acknowledged sequence number, the
//     same in every report (racing children, later rounds);
//   - EnqueueOnce of every key a child tried, again, returns its first
//     number and dup true (never a second message); a key tried but never
//     acknowledged is either there (it committed before the kill) or
//     written now;
//   - the queue holds exactly one message per key, at its number;
//   - tipkvtest.Healthy.
//
// open's DB is closed by RunOnce.
func RunOnce(t *testing.T, cfg OnceConfig, open func(t *testing.T) *tipkv.DB) {
	t.Helper()
	if cfg.Child == "" {
		t.Fatal("proctest: OnceConfig.Child names no test function")
	}
	cfg = cfg.withDefaults()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 27))
	acked := map[int]int64{} // key: its first sequence number
	tried := map[int]bool{}
	for round := range cfg.Rounds {
		target := 10 + rng.IntN(cfg.Keys/2)
		var mu sync.Mutex
		oks, dups := 0, 0
		killed := make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		var cmds []*exec.Cmd
		var failures []string
		for c := range cfg.Children {
			// From a few keys before the last one written on: the key
			// the kill cut is among them.
			sp, err := json.Marshal(onceSpec{Keys: cfg.Keys, First: max(len(acked)-5, 0) % cfg.Keys})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^"+cfg.Child+"$", "-test.count=1")
			cmd.Env = append(append(os.Environ(), cfg.Env...), onceEnv+"="+string(sp))
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
			wg.Add(1)
			go func() {
				defer wg.Done()
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					line, ok := strings.CutPrefix(sc.Text(), linePrefix)
					if !ok {
						continue
					}
					f := strings.Fields(line)
					mu.Lock()
					switch {
					case len(f) == 2 && f[0] == "TRY":
						k, _ := strconv.Atoi(f[1])
						tried[k] = true
					case len(f) == 4 && f[0] == "OK":
						k, _ := strconv.Atoi(f[1])
						seq, _ := strconv.ParseInt(f[2], 10, 64)
						if first, ok := acked[k]; ok && first != seq {
							failures = append(failures, fmt.Sprintf("round %d, child %d: key k%d acknowledged with %d, earlier with %d", round, c, k, seq, first))
						}
						if _, ok := acked[k]; !ok && f[3] == "true" && round == 0 && cfg.Children == 1 {
							failures = append(failures, fmt.Sprintf("round %d: key k%d a duplicate before any write of it", round, k))
						}
						acked[k] = seq
						oks++
						if f[3] == "true" {
							dups++
						}
						if oks >= target {
							once.Do(func() { close(killed) })
						}
					default:
						failures = append(failures, fmt.Sprintf("round %d, child %d: %s", round, c, line))
						once.Do(func() { close(killed) })
					}
					mu.Unlock()
				}
			}()
		}
		exited := make(chan struct{})
		go func() { wg.Wait(); close(exited) }()
		select {
		case <-killed:
		case <-exited:
			// Every child's output ended before the kill: they failed.
		case <-time.After(progressTimeout):
			t.Errorf("round %d: %d acknowledged writes in %v, the kill waits for %d", round, oks, progressTimeout, target)
		}
		for _, cmd := range cmds {
			_ = cmd.Process.Kill() // SIGKILL
		}
		wg.Wait()
		for _, cmd := range cmds {
			_ = cmd.Wait()
		}
		for _, f := range failures {
			t.Error(f)
		}
		if t.Failed() {
			t.FailNow()
		}
		db := open(t)
		checkOnce(t, round, db, acked, tried)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d children SIGKILLed after %d acknowledged writes (%d duplicates); %d keys written, checked", round, cfg.Children, oks, dups, len(acked))
	}
}

// checkOnce checks db after a kill (see RunOnce): it writes every key
// tried but not acknowledged, and notes its number in acked.
func checkOnce(t *testing.T, round int, db *tipkv.DB, acked map[int]int64, tried map[int]bool) {
	t.Helper()
	q, err := queue.Open[onceItem](db, OnceQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k := range tried {
		seq, dup, err := q.EnqueueOnce(db, fmt.Sprint("k", k), onceScope(k), onceItem{Key: k})
		if err != nil {
			t.Fatalf("round %d: key k%d again: %v", round, k, err)
		}
		first, ok := acked[k]
		switch {
		case ok && !dup:
			t.Fatalf("round %d: key k%d, acknowledged with %d, wrote a second message %d", round, k, first, seq)
		case ok && seq != first:
			t.Fatalf("round %d: key k%d, acknowledged with %d, returns %d", round, k, first, seq)
		}
		acked[k] = seq // tried and not acknowledged: committed before the kill (dup), or now
	}
	ms, err := q.Peek(len(acked) + 10)
	if err != nil {
		t.Fatal(err)
	}
	held := map[int]int64{}
	for _, m := range ms {
		if other, ok := held[m.Value.Key]; ok {
			t.Fatalf("round %d: key k%d has two messages, %d and %d", round, m.Value.Key, other, m.Seq)
		}
		held[m.Value.Key] = m.Seq
	}
	for k, seq := range acked {
		got, ok := held[k]
		if !ok {
			t.Fatalf("round %d: key k%d: its message %d is not in the queue", round, k, seq)
		}
		if got != seq {
			t.Fatalf("round %d: key k%d: its message is %d, the key returns %d", round, k, got, seq)
		}
	}
	if len(held) != len(acked) {
		t.Fatalf("round %d: the queue holds %d messages for %d keys", round, len(held), len(acked))
	}
	if n := q.Len(); n != len(acked) {
		t.Fatalf("round %d: Len %d, %d keys", round, n, len(acked))
	}
	tipkvtest.Healthy(t, db)
}
