// Package proctest is the harness of tipkv's multi-process tests: child
// processes (the test binary run again) that produce and consume on one
// shared engine while the test SIGKILLs them, starts them again and makes
// the engine's own trouble, and a check at the end that nothing
// acknowledged was lost and nothing was consumed twice. An engine module
// keeps only its faults (etcd leader kills, PostgreSQL backend
// terminations and crashes); the children, their reports and the check
// against a model are here, the same for every engine:
//
//	func TestMultiProcess(t *testing.T) {
//		rig := proctest.Start(t, proctest.Config{Child: "TestMultiProcessChild", Env: []string{"MY_ENGINE=" + addr}})
//		rig.WaitProgress(t, 40, "before the first fault")
//		rig.Kill(t, "consumer-0")
//		rig.Restart(t, "consumer-0")
//		... // the engine's faults, each followed by WaitProgress
//		rig.Stop(t)
//		rig.Check(t, openDB(&tipkv.Options{Clock: proctest.LaterClock}))
//	}
//
//	func TestMultiProcessChild(t *testing.T) {
//		proctest.Child(t, func(ctx context.Context, role string) (*tipkv.DB, error) {
//			return myengine.Open(ctx, os.Getenv("MY_ENGINE"))
//		})
//	}
//
// # The workload
//
// Every child has a role: producer-<i> or consumer-<i>, each a process.
// A producer's Update writes a version of one of a few documents that
// every producer writes (versioned), appends the same token to a feed and
// enqueues PerBatch messages, all or nothing; it pauses while the queue
// holds Backlog messages, if set. A consumer receives up to ReceiveMax messages
// under a lease of Lease and, in one Update, acknowledges them and
// records them in a queue of its own ("done-<role>"), so that the store,
// not the reports, says what was consumed: a consumer killed after its
// commit loses nothing from the count. A consumer whose Update had an
// unknown outcome sends it again, which is safe: if the first landed, its
// Ack fails with queue.ErrLeaseLost and nothing is written.
//
// Children report what they do on their standard output, one write(2) per
// line, so a SIGKILL cuts no line: each write before it is sent and again
// with its outcome (OK, UNK for an unknown outcome, ERR for a known
// failure), each delivery with the wall-clock times around its Receive.
//
// # The check
//
// After Stop, Check drains the queue (on a DB whose clock runs ahead, so
// that the leases of killed consumers have ended), reads the documents,
// the feed and the consumers' records, and checks them against the
// reports:
//
//   - every acknowledged document version is stored, holding what its
//     writer wrote (no version reused, none lost); every stored version
//     was sent by someone; versions are dense;
//   - every acknowledged feed event is at its position; a version and its
//     event, and the batch's messages, landed together or not at all
//     (whatever the Update's outcome: an unknown one may go either way, a
//     known failure wrote nothing);
//   - every message of a batch that landed was consumed or drained
//     exactly once, and nothing else was: no message lost, none
//     consumed twice, none invented; each sequence number holds one
//     message; each consumer's record matches a delivery to it;
//   - no message was delivered while another delivery's lease held;
//   - tipkvtest.Healthy (dense versions, queue heads and tails).
package proctest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Config shapes a multi-process run. The zero value of each field but
// Child means its default.
type Config struct {
	// Child is the name of the test function that runs a child: it calls
	// Child and nothing else. Required.
	Child string

	// Env is added to every child's environment: what the child needs to
	// reach the engine (its address, a namespace or table).
	Env []string

	// Producers and Consumers are how many children of each role run.
	// The default is 2 of each.
	Producers, Consumers int

	// PerBatch is how many messages a producer enqueues per Update. The
	// default is 10.
	PerBatch int

	// Members is how many children (member-<i>) are members of one
	// consumer group of the producers' feed (versioned.Member): one at a
	// time projects the feed, the others stand by; see WaitProjected. The
	// default is 0: the workload has no members.
	Members int

	// Lease is the consumers' lease, and the members' lease on their
	// group. The default is 2 seconds.
	Lease time.Duration

	// ReceiveMax is the most messages a consumer receives at once. The
	// default is 100.
	ReceiveMax int

	// Backlog, if above zero, is the queue's length at which producers
	// pause (each of their Updates then reads the queue's length first:
	// on a shared engine, a read of every message in it). The default (0)
	// is no limit.
	Backlog int

	// Groups, if above zero, puts the queue's messages in that many
	// message groups (queue.EnqueueOptions.Group, window 1): message k of
	// a batch in group k mod Groups. A consumer then records what it
	// acknowledges in its group's feed stream too, in the same Update,
	// and Check requires each group's messages acknowledged in queue
	// order. The default (0) is no groups.
	Groups int
}

func (c Config) withDefaults() Config {
	if c.Producers <= 0 {
		c.Producers = 2
	}
	if c.Consumers <= 0 {
		c.Consumers = 2
	}
	if c.PerBatch <= 0 {
		c.PerBatch = 10
	}
	if c.Lease <= 0 {
		c.Lease = 2 * time.Second
	}
	if c.ReceiveMax <= 0 {
		c.ReceiveMax = 100
	}
	return c
}

// childEnv carries a child's spec (JSON) in its environment.
const childEnv = "TIPKV_PROCTEST_CHILD"

// spec is what a child is told.
type spec struct {
	Role        string
	Incarnation int
	PerBatch    int
	Lease       time.Duration
	ReceiveMax  int
	Backlog     int
	Groups      int
}

// IsChild reports whether this process is a child that Start or RunOnce
// started. A TestMain that sets up what only the parent needs (a server,
// a cluster) skips it in a child.
func IsChild() bool { return os.Getenv(childEnv) != "" || os.Getenv(onceEnv) != "" }

// LaterClock is a clock an hour ahead of the wall clock: give it to the
// DB that Check drains (tipkv.Options.Clock), so that the leases killed
// consumers held have ended.
func LaterClock() time.Time { return time.Now().Add(time.Hour) }

// Rig is a running multi-process test: its children and their reports.
// Its methods are called from the test's goroutine.
type Rig struct {
	cfg      Config
	roles    []string
	members  []string // member-<i>: not in roles, since standbys make no progress
	log      *reports
	mu       sync.Mutex
	children map[string]*child
	lives    map[string]int // incarnations started, by role
}

// Start starts every child and returns the rig. The children run until
// Stop; any still running when the test ends are killed.
func Start(t *testing.T, cfg Config) *Rig {
	t.Helper()
	if cfg.Child == "" {
		t.Fatal("proctest: Config.Child names no test function")
	}
	cfg = cfg.withDefaults()
	r := &Rig{cfg: cfg, log: newReports(), children: map[string]*child{}, lives: map[string]int{}}
	for i := range cfg.Producers {
		r.roles = append(r.roles, fmt.Sprintf("producer-%d", i))
	}
	for i := range cfg.Consumers {
		r.roles = append(r.roles, fmt.Sprintf("consumer-%d", i))
	}
	for i := range cfg.Members {
		r.members = append(r.members, fmt.Sprintf("member-%d", i))
	}
	t.Cleanup(func() { // a failed test leaves no child behind
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.children {
			c.kill()
		}
	})
	for _, role := range append(r.Roles(), r.members...) {
		r.Restart(t, role)
	}
	return r
}

// Roles returns the children's roles: producer-0, ..., consumer-0, ....
func (r *Rig) Roles() []string { return append([]string(nil), r.roles...) }

// Restart starts the next incarnation of role (after Kill; Start starts
// the first).
func (r *Rig) Restart(t testing.TB, role string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.children[role] != nil {
		t.Fatalf("proctest: restart of %s, which runs", role)
	}
	r.lives[role]++
	sp, err := json.Marshal(spec{Role: role, Incarnation: r.lives[role], PerBatch: r.cfg.PerBatch, Lease: r.cfg.Lease, ReceiveMax: r.cfg.ReceiveMax, Backlog: r.cfg.Backlog, Groups: r.cfg.Groups})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+r.cfg.Child+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), r.cfg.Env...), childEnv+"="+string(sp))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{role: role, cmd: cmd, stdin: stdin, read: make(chan struct{})}
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), linePrefix); ok {
				r.log.add(line)
			}
		}
	}()
	r.children[role] = c
}

// KillRandom SIGKILLs a child chosen at random, starts it again and waits
// until every child has made progress acknowledged writes, rounds times.
func (r *Rig) KillRandom(t testing.TB, rounds, progress int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	roles := r.Roles()
	for range rounds {
		role := roles[rng.IntN(len(roles))]
		r.Kill(t, role)
		r.Restart(t, role)
		r.WaitProgress(t, progress, "after "+role+" was killed")
	}
}

// Kill SIGKILLs the child of role and waits until it is gone. It strikes
// in the middle of a write: just after the child reported an Update sent
// (a producer) or messages received (a consumer, which then holds their
// leases) and before it reported the outcome, as far as the parent can
// tell (the write may finish meanwhile). A child that reports no such
// moment within 30 seconds is killed where it is.
func (r *Rig) Kill(t testing.TB, role string) {
	t.Helper()
	r.mu.Lock()
	c := r.children[role]
	delete(r.children, role)
	self := fmt.Sprintf("%s.%d", role, r.lives[role])
	r.mu.Unlock()
	if c == nil {
		t.Fatalf("proctest: kill of %s, which does not run", role)
	}
	deadline := time.After(30 * time.Second)
wait:
	for !r.log.inFlight(self) {
		select {
		case <-r.log.changedCh():
		case <-deadline:
			break wait
		}
	}
	c.kill()
	t.Logf("SIGKILL child %s (its last report a write in flight: %v)", self, r.log.inFlight(self))
}

// Thaw SIGCONTs the child of role, stopped by FreezeInUpdate.
func (r *Rig) Thaw(t testing.TB, role string) {
	t.Helper()
	r.mu.Lock()
	c := r.children[role]
	r.mu.Unlock()
	if c == nil {
		t.Fatalf("proctest: thaw of %s, which does not run", role)
	}
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c.stdin, "thaw\n"); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGCONT child %s", role)
}

// Stop asks every child to finish (it closes their standard input) and
// waits until each has exited cleanly.
func (r *Rig) Stop(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	children := r.children
	r.children = map[string]*child{}
	r.mu.Unlock()
	for _, c := range children {
		_ = c.stdin.Close()
	}
	// A member's Follow leaves the group as it ends: its standby may take
	// over and write more while the others stop, which Check allows.
	for _, c := range children {
		<-c.read
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("child %s: %v", c.role, err)
		}
	}
}

// WaitProgress waits until every role has reported n more acknowledged
// writes than now (producers their Updates, consumers their
// acknowledgements), whatever the incarnation. It fails the test after 2
// minutes without.
func (r *Rig) WaitProgress(t testing.TB, n int, what string) {
	t.Helper()
	r.log.waitProgress(t, r.roles, n, what)
}

// Writes is the number of acknowledged writes reported so far.
func (r *Rig) Writes() int { return r.log.writes() }

// WaitWrites waits until n writes were acknowledged and returns when the
// n-th was reported. It fails the test after 2 minutes without.
func (r *Rig) WaitWrites(t testing.TB, n int, what string) time.Time {
	t.Helper()
	return r.log.waitWrites(t, n, what)
}

// Rate measures the messages acknowledged per second, from now until
// window passes or max messages were acknowledged, whichever comes
// first. It is a measurement for the test's log, not a check.
func (r *Rig) Rate(window time.Duration, max int) float64 {
	n0, t0 := r.log.acked(), time.Now()
	rate := func() float64 { return float64(r.log.acked()-n0) / time.Since(t0).Seconds() }
	deadline := time.After(window)
	for r.log.acked()-n0 < max {
		select {
		case <-r.log.changedCh():
		case <-deadline:
			return rate()
		}
	}
	return rate()
}

// child is a running child process.
type child struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	read  chan struct{} // closed when its output is read to the end
}

func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.read
	_ = c.cmd.Wait()
}
