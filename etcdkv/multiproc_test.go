package etcdkv_test

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/etcdkv/etcdtest"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/tipkvtest"
	"github.com/tipkv/tipkv/versioned"
)

// The multi-process test: a 3-member etcd cluster of real processes (built
// from the module), two tipkv processes (this test binary, run again as
// children) that each write documents (each with an event in a feed, in
// one Update), enqueue, receive and acknowledge on one namespace, while the test SIGKILLs the etcd leader and restarts
// it, SIGKILLs a follower and restarts it, and SIGKILLs each child and
// starts it again. Children report every write before they send it and
// again when it is acknowledged, on their standard output (a line is one
// write(2), so a SIGKILL loses no reported line). At the end the test
// drains the queue and checks, against the reports:
//
//   - every acknowledged document version is in the store, holding what
//     its writer wrote (no acknowledged write lost, no version reused);
//     nothing is stored that nobody tried to write; every acknowledged
//     event is at its position, and each version has its event (the
//     Update applied whole);
//   - every acknowledged enqueue was acknowledged by a consumer or drained
//     at the end, exactly once (a message may be missing only where an
//     Ack was sent and its process died, or its outcome was unknown);
//     no message was acknowledged twice, each has one sequence number;
//   - no message was delivered while another process's lease on it held;
//   - writes came back within seconds of the leader's kill;
//   - tipkvtest.Healthy (dense versions, queue heads and tails).
//
// Skipped with -short: building etcd takes a minute or two when the build
// cache is cold, and the test runs about 30 s.
func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the multi-process test builds etcd and runs for about 30 s")
	}
	if os.Getenv(etcdkv.ChildEnv) != "" {
		t.Skip("a child process")
	}
	pc, err := etcdtest.StartProcs(3, func() *exec.Cmd { return exec.Command(os.Args[0], "-test.run=^$") })
	require.NoError(t, err)
	defer pc.Close()
	leaderOf := func() int {
		t.Helper()
		i, err := pc.Leader(30 * time.Second)
		require.NoError(t, err)
		return i
	}
	ns := etcdkv.NamespaceForTest(t)
	log := newReports()

	children := map[string]*child{}
	start := func(name string, incarnation int) {
		children[name] = startChild(t, name, incarnation, pc.Endpoints(), ns, log)
	}
	start("A", 1)
	start("B", 1)

	// Each phase waits for progress (acknowledged messages and documents
	// from both children), then strikes.
	progress := func(what string) {
		t.Helper()
		log.waitProgress(t, 40, what)
	}
	progress("before the first fault")
	children["A"].kill(t)
	start("A", 2)
	progress("after child A was killed")

	leader := leaderOf()
	t.Logf("SIGKILL the etcd leader, member %d", leader)
	n := log.writes()
	killed := time.Now()
	pc.Kill(leader)
	back := log.waitWrites(t, n+1, "after the leader was killed")
	t.Logf("writes back %v after the leader's kill", back.Sub(killed).Round(time.Millisecond))
	require.Less(t, back.Sub(killed), 10*time.Second, "writes came back after the leader's kill") // 3 s expected; 10 s for a loaded CI machine
	progress("with the old leader down")
	require.NoError(t, pc.Restart(leader))
	progress("after the old leader restarted")

	follower := (leaderOf() + 1) % 3
	t.Logf("SIGKILL follower %d", follower)
	pc.Kill(follower)
	progress("with a follower down")
	children["B"].kill(t)
	start("B", 2)
	progress("after child B was killed")
	require.NoError(t, pc.Restart(follower))
	progress("after the follower restarted")

	for _, c := range children {
		c.stop(t)
	}

	// Drain what is left, with a clock an hour ahead so that the leases of
	// the killed consumers have ended.
	db, err := etcdkv.Open(context.Background(), etcdkv.Config{Endpoints: pc.Endpoints(), Namespace: ns},
		&tipkv.Options{Clock: func() time.Time { return time.Now().Add(time.Hour) }})
	require.NoError(t, err)
	defer db.Close()
	q, err := queue.Open[mpMsg](db, "jobs", &queue.Options[mpMsg]{MaxAttempts: -1})
	require.NoError(t, err)
	for {
		ms, err := q.Receive(100, time.Minute)
		require.NoError(t, err)
		if len(ms) == 0 {
			break
		}
		ids := make([]queue.ID, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
			log.add(fmt.Sprintf("DRAIN %s %d", m.Value.ID, m.Seq))
		}
		require.NoError(t, q.Ack(db, ids...))
	}
	docs, err := versioned.NewCollection[mpDoc](db, "docs", nil)
	require.NoError(t, err)
	stored := map[string]map[int64]string{}
	for _, id := range mpDocIDs {
		stored[id] = map[int64]string{}
		for d, err := range docs.History(id, tipkv.Query{}) {
			require.NoError(t, err)
			stored[id][d.Version] = d.Value.Token
		}
	}
	feed, err := versioned.NewFeed[mpDoc](db, nil)
	require.NoError(t, err)
	events := map[int64]string{}
	for e, err := range feed.Newest("changes", tipkv.Query{}) {
		require.NoError(t, err)
		events[e.Position] = e.Value.Token
	}
	log.check(t, stored, events)
	tipkvtest.Healthy(t, db)
}

// The queue's message and the documents the children write.
type (
	mpMsg struct {
		ID string `msgpack:"id"`
	}
	mpDoc struct {
		Token string `msgpack:"token"`
	}
)

var mpDocIDs = []string{"d0", "d1", "d2"}

// mpLease is the children's lease on a message.
const mpLease = 2 * time.Second

// TestMultiProcessChild is the child's body: it runs only in a process
// that TestMultiProcess started, and writes until its standard input
// closes.
func TestMultiProcessChild(t *testing.T) {
	spec := os.Getenv(etcdkv.ChildEnv)
	if spec == "" {
		t.Skip("run by TestMultiProcess in a child process")
	}
	parts := strings.SplitN(spec, "|", 4)
	name, incarnation, endpoints, ns := parts[0], parts[1], strings.Split(parts[2], ","), parts[3]
	self := name + "." + incarnation
	out := &lineWriter{w: os.Stdout}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { // the parent closes stdin to stop the child
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	db, err := etcdkv.Open(ctx, etcdkv.Config{Endpoints: endpoints, Namespace: ns, RequestTimeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := queue.Open[mpMsg](db, "jobs", &queue.Options[mpMsg]{MaxAttempts: -1})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := versioned.NewCollection[mpDoc](db, "docs", nil)
	if err != nil {
		t.Fatal(err)
	}
	feed, err := versioned.NewFeed[mpDoc](db, nil)
	if err != nil {
		t.Fatal(err)
	}
	out.printf("UP %s", self)

	// pause paces a loop after a failed call: the cluster may have no
	// leader for a moment.
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { // producer: batches of 3 messages, while the queue holds under 100
		for i := 0; ctx.Err() == nil; {
			if q.Len() >= 100 {
				if err := q.Wait(ctx); err != nil && ctx.Err() == nil {
					pause()
				}
				continue
			}
			ids := make([]string, 3)
			for j := range ids {
				ids[j] = fmt.Sprintf("%s-%d", self, i)
				i++
				out.printf("ENQING %s", ids[j])
			}
			err := db.Update(func(b *tipkv.Batch) error {
				for _, id := range ids {
					if err := q.Enqueue(b, mpMsg{ID: id}); err != nil {
						return err
					}
				}
				return nil
			})
			for _, id := range ids {
				out.printf("%s %s %s", outcome("ENQ", err), id, self)
			}
			if err != nil {
				pause()
			}
		}
	})
	wg.Go(func() { // consumer
		for ctx.Err() == nil {
			before := time.Now()
			ms, err := q.ReceiveWait(ctx, 5, mpLease)
			after := time.Now()
			if err != nil {
				pause()
				continue
			}
			ids := make([]queue.ID, len(ms))
			for i, m := range ms {
				ids[i] = m.ID
				out.printf("RECV %s %d %d %d %s", m.Value.ID, m.Seq, before.UnixNano(), after.UnixNano(), self)
				out.printf("ACKING %s", m.Value.ID)
			}
			err = q.Ack(db, ids...)
			for _, m := range ms {
				out.printf("%s %s %s", outcome("ACK", err), m.Value.ID, self)
			}
		}
	})
	wg.Go(func() { // documents on a few ids both children share, each Put with a feed event in one Update
		for i := 0; ctx.Err() == nil; i++ {
			id := mpDocIDs[i%len(mpDocIDs)]
			token := fmt.Sprintf("%s-%d", self, i)
			out.printf("PUTTING %s %s", id, token)
			var v, pos int64
			err := db.Update(func(b *tipkv.Batch) error {
				var err error
				if v, err = docs.Put(b, id, mpDoc{Token: token}); err != nil {
					return err
				}
				pos, err = feed.Append(b, "changes", mpDoc{Token: token})
				return err
			})
			out.printf("%s %s %s %d %d %s", outcome("PUT", err), id, token, v, pos, self)
			if err != nil {
				pause()
			}
		}
	})
	wg.Wait()
	out.printf("DONE %s", self)
}

// outcome names a write's result in a report: OK, UNK (unknown outcome)
// or ERR (definitely not applied).
func outcome(op string, err error) string {
	switch {
	case err == nil:
		return op + "-OK"
	case errors.Is(err, tipkv.ErrUnknownOutcome):
		return op + "-UNK"
	}
	return op + "-ERR"
}

// lineWriter writes whole lines, one write(2) each.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, fmt.Sprintf(format, args...)+"\n")
}

// child is a running child process.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // its output is read to the end
}

func startChild(t *testing.T, name string, incarnation int, endpoints []string, ns string, log *reports) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestMultiProcessChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%s|%s", etcdkv.ChildEnv, name, incarnation, strings.Join(endpoints, ","), ns))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	c := &child{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			log.add(sc.Text())
		}
	}()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	return c
}

// kill SIGKILLs the child and waits for it.
func (c *child) kill(t *testing.T) {
	t.Helper()
	t.Logf("SIGKILL child %s", c.name)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	<-c.done
	_ = c.cmd.Wait()
}

// stop closes the child's stdin and waits for it to finish cleanly.
func (c *child) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, c.stdin.Close())
	<-c.done
	require.NoError(t, c.cmd.Wait(), "child %s", c.name)
}

// reports collects the children's lines.
type reports struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every line
	lines   []string
	nwrites int            // acknowledged writes
	at      []time.Time    // when each acknowledged write was reported
	perKind map[string]int // acknowledged writes by kind and child name
}

func newReports() *reports {
	return &reports{changed: make(chan struct{}), perKind: map[string]int{}}
}

func (r *reports) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	f := strings.Fields(line)
	if len(f) > 0 && (f[0] == "ENQ-OK" || f[0] == "ACK-OK" || f[0] == "PUT-OK") {
		r.nwrites++
		r.at = append(r.at, time.Now())
		r.perKind[f[0]+" "+f[len(f)-1][:1]]++ // the reporter's name
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *reports) writes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nwrites
}

// wait blocks until ok holds (checked under the lock at every line) or a
// generous deadline passes.
func (r *reports) wait(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		r.mu.Lock()
		done, ch := ok(), r.changed
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no progress %s in 2 minutes", what)
		}
	}
}

// waitWrites waits for n acknowledged writes and returns when the n-th
// was reported.
func (r *reports) waitWrites(t *testing.T, n int, what string) time.Time {
	t.Helper()
	r.wait(t, what, func() bool { return r.nwrites >= n })
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at[n-1]
}

// waitProgress waits until both children have acknowledged n more
// messages and n more documents than now (by child name, whatever the
// incarnation).
func (r *reports) waitProgress(t *testing.T, n int, what string) {
	t.Helper()
	r.mu.Lock()
	base := map[string]int{}
	for k, v := range r.perKind {
		base[k] = v
	}
	r.mu.Unlock()
	r.wait(t, what, func() bool {
		for _, k := range []string{"ACK-OK A", "ACK-OK B", "PUT-OK A", "PUT-OK B"} {
			if r.perKind[k]-base[k] < n {
				return false
			}
		}
		return true
	})
}

// check checks the reports against the store's documents (id, version:
// token) after the queue was drained.
func (r *reports) check(t testing.TB, stored map[string]map[int64]string, events map[int64]string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	type delivery struct {
		seq           int64
		before, after int64
		by            string
	}
	var (
		putting    = map[string]bool{} // tokens a Put was sent for
		putOK      = map[string]string{}
		putPos     = map[int64]string{}
		enqing     = map[string]bool{}
		enqOK      = map[string]bool{}
		acking     = map[string]int{}
		ackOK      = map[string]int{}
		ackUnknown = map[string]bool{}
		drained    = map[string]int{}
		deliveries = map[string][]delivery{}
		seqs       = map[int64]string{}
		counts     = map[string]int{}
	)
	for _, line := range r.lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		counts[f[0]]++
		switch f[0] {
		case "PUTTING":
			putting[f[2]] = true
		case "PUT-OK":
			putOK[f[1]+" "+f[3]] = f[2]
			pos, _ := strconv.ParseInt(f[4], 10, 64)
			putPos[pos] = f[2]
		case "ENQING":
			enqing[f[1]] = true
		case "ENQ-OK":
			enqOK[f[1]] = true
		case "ACKING":
			acking[f[1]]++
		case "ACK-OK":
			ackOK[f[1]]++
		case "ACK-UNK":
			ackUnknown[f[1]] = true
		case "RECV", "DRAIN":
			seq, _ := strconv.ParseInt(f[2], 10, 64)
			if other, ok := seqs[seq]; ok && other != f[1] {
				t.Errorf("sequence number %d holds messages %s and %s", seq, other, f[1])
			}
			seqs[seq] = f[1]
			if f[0] == "DRAIN" {
				drained[f[1]]++
				continue
			}
			before, _ := strconv.ParseInt(f[3], 10, 64)
			after, _ := strconv.ParseInt(f[4], 10, 64)
			deliveries[f[1]] = append(deliveries[f[1]], delivery{seq, before, after, f[5]})
		}
	}
	t.Logf("reports: %v", counts)

	// Documents: every acknowledged version holds its writer's token;
	// every stored version was sent by someone; versions are 1..n.
	for key, token := range putOK {
		f := strings.Fields(key)
		v, _ := strconv.ParseInt(f[1], 10, 64)
		if got, ok := stored[f[0]][v]; !ok {
			t.Errorf("acknowledged %s version %d (%s) is lost", f[0], v, token)
		} else if got != token {
			t.Errorf("%s version %d was acknowledged to %s but holds %s: a version reused", f[0], v, token, got)
		}
	}
	for id, vs := range stored {
		for v := int64(1); v <= int64(len(vs)); v++ {
			token, ok := vs[v]
			if !ok {
				t.Errorf("%s: version %d missing among %d", id, v, len(vs))
			} else if !putting[token] {
				t.Errorf("%s version %d holds %s, which nobody wrote", id, v, token)
			}
		}
	}

	// The feed: every acknowledged event is at its position; each stored
	// document version has its event and each event its version (one
	// Update wrote both, or neither).
	for pos, token := range putPos {
		if got, ok := events[pos]; !ok {
			t.Errorf("acknowledged event %s at position %d is lost", token, pos)
		} else if got != token {
			t.Errorf("position %d was acknowledged to %s but holds %s", pos, token, got)
		}
	}
	inDocs := map[string]bool{}
	for _, vs := range stored {
		for _, token := range vs {
			inDocs[token] = true
		}
	}
	inFeed := map[string]bool{}
	for pos, token := range events {
		if inFeed[token] {
			t.Errorf("event %s appended twice (again at %d)", token, pos)
		}
		inFeed[token] = true
		if !inDocs[token] {
			t.Errorf("event %s at %d has no document version: half an Update applied", token, pos)
		}
	}
	for token := range inDocs {
		if !inFeed[token] {
			t.Errorf("document version %s has no event: half an Update applied", token)
		}
	}

	// Messages.
	for id := range enqOK {
		n := ackOK[id] + drained[id]
		switch {
		case n > 1:
			t.Errorf("message %s acknowledged %d times (%d by children, %d drained)", id, n, ackOK[id], drained[id])
		case n == 0 && acking[id] == 0 && !ackUnknown[id]:
			t.Errorf("acknowledged enqueue of %s lost: never acknowledged nor drained, and no Ack of it was ever sent", id)
		}
	}
	for id := range ackOK {
		if ackOK[id]+drained[id] > 1 && !enqOK[id] {
			t.Errorf("message %s acknowledged %d times", id, ackOK[id]+drained[id])
		}
	}
	for id := range deliveries {
		if !enqing[id] {
			t.Errorf("message %s delivered, never enqueued", id)
		}
	}
	// Leases: a message is delivered again only after the lease of its
	// previous delivery ended (plus the clock skew allowed).
	for id, ds := range deliveries {
		slices.SortFunc(ds, func(a, b delivery) int { return cmp.Compare(a.before, b.before) })
		for i := 1; i < len(ds); i++ {
			prev, cur := ds[i-1], ds[i]
			if end := prev.before + int64(mpLease); cur.after < end {
				t.Errorf("message %s delivered to %s while %s's lease held (%v before its end)", id, cur.by, prev.by, time.Duration(end-cur.after))
			}
		}
	}
}

// The multi-process test's checker finds each kind of fault it looks for,
// in reports made up for it.
func TestMultiProcessChecker(t *testing.T) {
	lease := int64(mpLease)
	good := []string{
		"PUTTING d0 A.1-0", "PUT-OK d0 A.1-0 1 100 A.1",
		"PUTTING d0 B.1-0", "PUT-UNK d0 B.1-0 0 0 B.1", // landed as version 2, at 101
		"ENQING A.1-0", "ENQ-OK A.1-0 A.1",
		"ENQING A.1-1", "ENQ-OK A.1-1 A.1",
		"ENQING A.1-2", "ENQ-UNK A.1-2 A.1",
		fmt.Sprintf("RECV A.1-0 7 %d %d B.1", 0, 10), "ACKING A.1-0", "ACK-OK A.1-0 B.1",
		fmt.Sprintf("RECV A.1-1 8 %d %d B.1", 0, 10), "ACKING A.1-1", // B.1 killed mid-ack
		fmt.Sprintf("RECV A.1-2 9 %d %d A.1", 0, 10), // A.1 killed: delivered again after the lease
		fmt.Sprintf("RECV A.1-2 9 %d %d B.2", lease, lease+10), "ACKING A.1-2", "ACK-OK A.1-2 B.2",
	}
	stored := func() map[string]map[int64]string {
		return map[string]map[int64]string{"d0": {1: "A.1-0", 2: "B.1-0"}}
	}
	events := func() map[int64]string { return map[int64]string{100: "A.1-0", 101: "B.1-0"} }
	run := func(lines []string, docs map[string]map[int64]string, evs map[int64]string) []string {
		r := newReports()
		for _, l := range lines {
			r.add(l)
		}
		rec := &recorder{}
		r.check(rec, docs, evs)
		return rec.errs
	}
	require.Empty(t, run(good, stored(), events()))

	for _, c := range []struct {
		name  string
		lines []string
		docs  func(map[string]map[int64]string)
		evs   func(map[int64]string)
		want  string
	}{
		{"version reused", good, func(d map[string]map[int64]string) { d["d0"] = map[int64]string{1: "B.1-0"} }, nil, "holds B.1-0"},
		{"version lost", good, func(d map[string]map[int64]string) { d["d0"] = map[int64]string{2: "B.1-0"} }, nil, "version 1 (A.1-0) is lost"},
		{"invented version", good, func(d map[string]map[int64]string) { d["d0"][3] = "X" }, nil, "nobody wrote"},
		{"gap", good, func(d map[string]map[int64]string) { d["d0"][4] = "A.1-0" }, nil, "missing"},
		{"event lost", good, nil, func(e map[int64]string) { delete(e, 100) }, "position 100 is lost"},
		{"event moved", good, nil, func(e map[int64]string) { e[100] = "B.1-0" }, "holds B.1-0"},
		{"half an update", good, nil, func(e map[int64]string) { delete(e, 101) }, "B.1-0 has no event"},
		{"lost message", append(slices.Clone(good), "ENQING A.1-9", "ENQ-OK A.1-9 A.1"), nil, nil, "A.1-9 lost"},
		{"acked twice", append(slices.Clone(good), "DRAIN A.1-0 7"), nil, nil, "acknowledged 2 times"},
		{"seq reused", append(slices.Clone(good), "ENQING A.1-8", "ENQ-OK A.1-8 A.1", "DRAIN A.1-8 7"), nil, nil, "sequence number 7"},
		{"never enqueued", append(slices.Clone(good), "RECV Z-1 20 0 1 A.1"), nil, nil, "never enqueued"},
		{"lease broken", append(slices.Clone(good), fmt.Sprintf("RECV A.1-1 8 %d %d A.2", 5, lease-1)), nil, nil, "lease held"},
	} {
		t.Run(c.name, func(t *testing.T) {
			docs, evs := stored(), events()
			if c.docs != nil {
				c.docs(docs)
			}
			if c.evs != nil {
				c.evs(evs)
			}
			errs := run(c.lines, docs, evs)
			require.NotEmpty(t, errs)
			require.Contains(t, strings.Join(errs, "\n"), c.want)
		})
	}
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Logf(string, ...any)       {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
