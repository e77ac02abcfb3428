package sqlkv_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/tipkvtest"
	"github.com/tipkv/tipkv/versioned"
)

// Several tipkv processes on one table: two producers and two consumers,
// each a child process (this test binary run again), on one queue and a
// few documents. The test measures a quiet phase first (messages per
// second end to end), then makes trouble: it SIGKILLs children and starts
// them again, terminates server backends in the middle of their work
// (pg_terminate_backend), and kills one backend with kill -9 (the server
// then restarts every session and recovers). At the end it stops the
// children, drains the queue and checks:
//
//   - nothing acknowledged is lost: every batch a producer saw commit was
//     consumed (acknowledged by a consumer) or is still in the queue;
//   - nothing is delivered twice after an acknowledgement: no message is
//     acknowledged twice, or acknowledged and then found in the queue;
//   - versions are never reused: every Put that returned a version of
//     the document all producers write returned a different one;
//   - every commit whose outcome was unknown was resolved by reading back
//     (a producer reads its own document; a consumer's Ack is retried,
//     which is safe: an Ack that landed fails with ErrLeaseLost);
//   - the store passes tipkvtest.Healthy.
//
// Each producer's Update writes its own document (the number of its
// batch), a version of the shared document, and enqueues ten messages; a
// producer that starts again reads its document to go on where the
// store says it stopped.
func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs child processes for about 20 s")
	}
	table := newTable(t)
	cfg := sqlkv.Config{DSN: dsn(t), Table: table}
	sqlStore, err := sqlkv.NewStore(context.Background(), cfg)
	require.NoError(t, err)
	db, err := tipkv.OpenEngine(sqlStore, sqlStore.Name(), nil)
	require.NoError(t, err)
	defer db.Close()

	log := &mpLog{}
	var mu sync.Mutex
	children := map[string]*mpChild{}
	start := func(role string) {
		c := startChild(t, table, role, log)
		mu.Lock()
		children[role] = c
		mu.Unlock()
	}
	roles := []string{"producer-0", "producer-1", "consumer-0", "consumer-1"}
	for _, r := range roles {
		start(r)
	}
	defer func() { // a failed test leaves no child behind
		mu.Lock()
		defer mu.Unlock()
		for _, c := range children {
			c.kill()
		}
	}()

	// The quiet phase: throughput once every child has acknowledged or
	// consumed something.
	log.waitFor(t, func(l *mpLog) bool { return l.count("ack ") > 0 && l.consumed() > 0 })
	n0, t0 := log.consumed(), time.Now()
	log.waitFor(t, func(l *mpLog) bool { return l.consumed()-n0 >= 20_000 || time.Since(t0) > 5*time.Second })
	rate := float64(log.consumed()-n0) / time.Since(t0).Seconds()
	t.Logf("2 producer and 2 consumer processes, 10 messages per enqueue, up to 100 per receive: %.0f messages/s end to end", rate)

	// Trouble.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	ctx := context.Background()
	terminated, sigkills := 0, 0
	for round := range 12 {
		switch round % 3 {
		case 0: // SIGKILL a child, start it again
			r := roles[rng.IntN(len(roles))]
			mu.Lock()
			c := children[r]
			mu.Unlock()
			c.kill()
			sigkills++
			start(r)
		default: // terminate the backends of the children that are busy
			var n int
			require.NoError(t, sqlStore.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name LIKE 'sqlkv_mp_%' AND state <> 'idle'`).Scan(&n))
			terminated += n
		}
		// Let the children get going again: wait for new commits.
		before := log.consumed()
		log.waitFor(t, func(l *mpLog) bool { return l.consumed() > before+200 })
	}
	killed9 := false
	if server(t).Started() {
		// kill -9 a busy backend: the server ends every session, recovers
		// and accepts connections again.
		var pid int
		err := sqlStore.Pool().QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'sqlkv_mp_%' AND state <> 'idle' LIMIT 1`).Scan(&pid)
		if err == nil {
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			killed9 = true
			before := log.consumed()
			log.waitFor(t, func(l *mpLog) bool { return l.consumed() > before+200 })
		}
	}
	t.Logf("trouble: %d children SIGKILLed and started again, %d backends terminated, kill -9 of a backend: %v", sigkills, terminated, killed9)

	// Stop: children finish what they are doing and exit.
	mu.Lock()
	for _, c := range children {
		c.stop(t)
	}
	children = map[string]*mpChild{}
	mu.Unlock()

	// Drain with a DB of the test (the pool reconnects after the kill -9).
	q, err := queue.Open[mpMsg](db, "work", nil)
	require.NoError(t, err)
	var drained []mpMsg
	for {
		st, err := q.ReadStats()
		if err == nil && st.Len == 0 {
			break
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute) // leases of killed consumers end
		ms, err := q.ReceiveWait(wctx, 1000, time.Minute)
		cancel()
		if err != nil {
			continue // a connection the kill -9 broke, found now
		}
		ids := make([]queue.ID, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
			drained = append(drained, m.Value)
		}
		require.NoError(t, q.Ack(db, ids...))
	}
	var consumed []mpMsg
	for _, r := range roles[2:] {
		consumed = append(consumed, popAll(t, db, "done-"+r)...)
	}
	mpCheck(t, log, consumed, drained)
	tipkvtest.Healthy(t, db)
}

// mpMsg is a message: producer P's batch N, message K of it.
type mpMsg struct {
	P int `msgpack:"p"`
	N int `msgpack:"n"`
	K int `msgpack:"k"`
}

// mpDoc is a producer's document and the shared one: the batch last
// committed.
type mpDoc struct {
	P int `msgpack:"p"`
	N int `msgpack:"n"`
}

const mpPerBatch = 10

func mpCheck(t *testing.T, log *mpLog, consumed, drained []mpMsg) {
	t.Helper()
	seen := map[mpMsg]int{}    // consumed (recorded with its Ack), or drained
	acked := map[[2]int]bool{} // producer, batch: committed
	versions := map[int64]string{}
	var unknownP, landedP, unknownC int
	for _, line := range log.all() {
		f := strings.Fields(line)
		num := func(i int) int { n, _ := strconv.Atoi(f[i]); return n }
		switch f[0] {
		case "ack": // ack p n version (-1: resolved by reading back)
			acked[[2]int{num(1), num(2)}] = true
			if v, _ := strconv.ParseInt(f[3], 10, 64); v > 0 {
				require.Empty(t, versions[v], "version %d of the shared document returned twice: %s and %s", v, versions[v], line)
				versions[v] = line
			}
		case "unknown-producer": // unknown-producer p n landed|lost
			unknownP++
			if f[3] == "landed" {
				landedP++
			}
		case "unknown-consumer":
			unknownC++
		}
	}
	for _, m := range append(consumed, drained...) {
		seen[m]++
	}
	for m, n := range seen {
		require.Equal(t, 1, n, "message %+v delivered and acknowledged %d times", m, n)
	}
	lost := 0
	for pn := range acked {
		for k := range mpPerBatch {
			if m := (mpMsg{pn[0], pn[1], k}); seen[m] == 0 {
				lost++
				t.Errorf("message %+v of a committed batch is lost", m)
			}
		}
	}
	t.Logf("%d batches seen committed by their producers (%d messages); %d messages consumed, %d drained at the end; %d versions of the shared document, none returned twice; unknown outcomes: %d producer commits (%d had landed, found by reading back), %d consumer Updates (sent again)",
		len(acked), len(acked)*mpPerBatch, len(consumed), len(drained), len(versions), unknownP, landedP, unknownC)
	require.Zero(t, lost)
	require.NotEmpty(t, acked)
}

// mpLog collects the lines the children print.
type mpLog struct {
	mu    sync.Mutex
	lines []string
	n     map[string]int // lines by first word and space
	msgs  int            // messages the consumed lines count
}

func (l *mpLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.lines = append(l.lines, line)
	if w, rest, ok := strings.Cut(line, " "); ok {
		l.n[w+" "]++
		if w == "consumed" {
			n, _ := strconv.Atoi(rest)
			l.msgs += n
		}
	}
}

func (l *mpLog) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[prefix]
}

// consumed is the number of messages the consumers reported consumed.
func (l *mpLog) consumed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msgs
}

func (l *mpLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// waitFor waits until ok holds of the log, polled every 10 ms, failing
// after 2 minutes without it.
func (l *mpLog) waitFor(t *testing.T, ok func(*mpLog) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ok(l) {
		require.True(t, time.Now().Before(deadline), "the children make no progress; last lines: %v", l.tail(10))
		time.Sleep(10 * time.Millisecond) // polling the log for the event
	}
}

func (l *mpLog) tail(n int) []string {
	all := l.all()
	return all[max(0, len(all)-n):]
}

type mpChild struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	read  chan struct{} // closed when its output is read to the end
}

// startChild runs this test binary again as one of the processes.
func startChild(t *testing.T, table, role string, log *mpLog) *mpChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMultiProcessChild$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		"SQLKV_DSN="+dsn(t), // the child names its connections sqlkv_mp_<role>
		"SQLKV_MP_TABLE="+table,
		"SQLKV_MP_ROLE="+role,
	)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	c := &mpChild{role: role, cmd: cmd, stdin: stdin, read: make(chan struct{})}
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "MP "); ok {
				log.add(line)
			}
		}
	}()
	return c
}

func (c *mpChild) kill() {
	_ = c.cmd.Process.Kill()
	<-c.read
	_ = c.cmd.Wait()
}

// stop closes the child's stdin, which makes it finish and exit.
func (c *mpChild) stop(t *testing.T) {
	_ = c.stdin.Close()
	<-c.read
	require.NoError(t, c.cmd.Wait(), "child %s", c.role)
}

// TestMultiProcessChild is one of TestMultiProcess's processes; it runs
// only when that test starts it.
func TestMultiProcessChild(t *testing.T) {
	role := os.Getenv("SQLKV_MP_ROLE")
	if role == "" {
		t.Skip("a child of TestMultiProcess")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the parent closes stdin: finish
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	// The parent finds the children's backends by application_name.
	pc := poolConfig(t, "sqlkv_mp_"+role)
	pc.MaxConns = 16 // the size of the pool a store makes from a DSN
	// The pool connects lazily: the server may be recovering (below).
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	defer pool.Close()
	var db *tipkv.DB
	for { // the server may be recovering from a kill -9
		var err error
		db, err = sqlkv.Open(ctx, sqlkv.Config{Pool: pool, Table: os.Getenv("SQLKV_MP_TABLE")}, nil)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // a retry's pause
	}
	defer db.Close()
	say := func(format string, args ...any) {
		// One write per line: a SIGKILL cuts a line whole or not at all.
		_, _ = os.Stdout.WriteString("MP " + fmt.Sprintf(format, args...) + "\n")
	}
	kind, no, _ := strings.Cut(role, "-")
	id, _ := strconv.Atoi(no)
	q, err := queue.Open[mpMsg](db, "work", nil)
	require.NoError(t, err)
	docs, err := versioned.NewCollection[mpDoc](db, "docs", nil)
	require.NoError(t, err)
	if kind == "producer" {
		mpProduce(ctx, id, db, q, docs, say)
	} else {
		mpConsume(ctx, role, db, q, say)
	}
}

func mpProduce(ctx context.Context, p int, db *tipkv.DB, q *queue.Queue[mpMsg], docs *versioned.Collection[mpDoc], say func(string, ...any)) {
	own := fmt.Sprintf("producer-%d", p)
	// Where the store says this producer stopped.
	next := -1
	for next < 0 && ctx.Err() == nil {
		d, err := docs.Latest(own)
		switch {
		case err == nil:
			next = d.Value.N + 1
		case errors.Is(err, tipkv.ErrNotFound):
			next = 0
		default:
			time.Sleep(10 * time.Millisecond) // a retry's pause
		}
	}
	for ctx.Err() == nil {
		var shared int64
		err := db.Update(func(b *tipkv.Batch) error {
			if _, err := docs.Put(b, own, mpDoc{P: p, N: next}); err != nil {
				return err
			}
			v, err := docs.Put(b, "shared", mpDoc{P: p, N: next})
			if err != nil {
				return err
			}
			shared = v
			msgs := make([]mpMsg, mpPerBatch)
			for k := range msgs {
				msgs[k] = mpMsg{P: p, N: next, K: k}
			}
			return q.Enqueue(b, msgs...)
		})
		if errors.Is(err, tipkv.ErrUnknownOutcome) {
			// Read back: the batch landed if this producer's document
			// says so. Until the read succeeds, nothing else is sent.
			for {
				d, rerr := docs.Latest(own)
				if rerr == nil || errors.Is(rerr, tipkv.ErrNotFound) {
					if rerr == nil && d.Value.N == next {
						say("unknown-producer %d %d landed", p, next)
						err, shared = nil, -1
					} else {
						say("unknown-producer %d %d lost", p, next)
					}
					break
				}
				time.Sleep(10 * time.Millisecond) // a retry's pause
			}
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond) // nothing landed: try again
			continue
		}
		say("ack %d %d %d", p, next, shared)
		next++
	}
}

// mpConsume receives messages and, in one Update, acknowledges them and
// records them in a queue of its own ("done-<role>"): the store, not the
// log, says what was consumed, so a consumer killed after its commit and
// before its log line loses nothing from the count.
func mpConsume(ctx context.Context, role string, db *tipkv.DB, q *queue.Queue[mpMsg], say func(string, ...any)) {
	done, err := queue.Open[mpMsg](db, "done-"+role, nil)
	if err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		ms, err := q.ReceiveWait(ctx, 100, 2*time.Second)
		if err != nil {
			if ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond) // a retry's pause
			}
			continue
		}
		ids := make([]queue.ID, len(ms))
		vals := make([]mpMsg, len(ms))
		for i, m := range ms {
			ids[i], vals[i] = m.ID, m.Value
		}
		ack := func() error {
			return db.Update(func(b *tipkv.Batch) error {
				if err := q.Ack(b, ids...); err != nil {
					return err
				}
				return done.Enqueue(b, vals...)
			})
		}
		err = ack()
		for errors.Is(err, tipkv.ErrUnknownOutcome) || (err != nil && !errors.Is(err, queue.ErrLeaseLost) && ctx.Err() == nil) {
			// Sending the Update again is safe: if the first landed, its
			// Ack fails with ErrLeaseLost and nothing is written.
			if errors.Is(err, tipkv.ErrUnknownOutcome) {
				say("unknown-consumer")
			}
			time.Sleep(10 * time.Millisecond) // a retry's pause
			err = ack()
		}
		if err == nil {
			say("consumed %d", len(ms))
		}
	}
}

// popAll pops every message of the queue name.
func popAll(t testing.TB, db *tipkv.DB, name string) []mpMsg {
	t.Helper()
	q, err := queue.Open[mpMsg](db, name, nil)
	require.NoError(t, err)
	var out []mpMsg
	for {
		ms, err := q.Pop(1000)
		require.NoError(t, err)
		if len(ms) == 0 {
			return out
		}
		for _, m := range ms {
			out = append(out, m.Value)
		}
	}
}
