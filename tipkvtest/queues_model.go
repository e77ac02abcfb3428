package tipkvtest

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

var queueModelSeed = flag.Uint64("queue.model.seed", 0, "replay one queue model seed (conformance)")

// qmsg is a message in the queue model.
type qmsg struct {
	seq      int64
	value    int64
	attempts int
	leased   bool
	id       queue.ID  // the lease, while leased by this process (zero: leased by a process that has gone)
	until    time.Time // leased: when the lease ends; otherwise when it becomes visible (zero: now)
	group    string    // its message group, "" for none
}

// queueModel is what a queue should hold: live messages in sequence order
// and dead letters.
type queueModel struct {
	live        []*qmsg
	dead        []qmsg
	maxAttempts int
	now         func() time.Time
	lapse       time.Duration // how long after a lease ends it may be taken over
	window      int           // queue.Options.GroupWindow
}

// expire ends the leases that another Receive may take over by now.
func (m *queueModel) expire() {
	for _, x := range m.live {
		if x.leased && !x.until.Add(m.lapse).After(m.now()) {
			x.leased, x.id, x.until = false, queue.ID{}, time.Time{}
		}
	}
}

// visible returns the messages a Receive may deliver now, oldest first:
// neither leased nor delayed, and in their group's window (fewer than
// window live messages of their group before them).
func (m *queueModel) visible() []*qmsg {
	m.expire()
	var out []*qmsg
	before := make(map[string]int)
	for _, x := range m.live {
		n := before[x.group]
		if x.group != "" {
			before[x.group]++
		}
		if x.group != "" && n >= m.window {
			continue
		}
		if !x.leased && !x.until.After(m.now()) {
			out = append(out, x)
		}
	}
	return out
}

// deliver is what Receive and Pop do: walk the visible messages oldest
// first, moving those delivered maxAttempts times to the dead letters,
// and deliver up to max of the others.
func (m *queueModel) deliver(max int) []*qmsg {
	var got []*qmsg
	for _, x := range m.visible() {
		if len(got) == max {
			break
		}
		if x.attempts >= m.maxAttempts {
			m.remove(x.seq)
			m.dead = append(m.dead, *x)
			slices.SortFunc(m.dead, func(a, b qmsg) int { return int(a.seq - b.seq) })
			continue
		}
		x.attempts++
		x.until = time.Time{}
		got = append(got, x)
	}
	return got
}

func (m *queueModel) remove(seq int64) {
	m.live = slices.DeleteFunc(m.live, func(x *qmsg) bool { return x.seq == seq })
}

// held returns the messages whose lease this process holds now.
func (m *queueModel) held() []*qmsg {
	m.expire()
	var out []*qmsg
	for _, x := range m.live {
		if x.leased && !x.id.IsZero() {
			out = append(out, x)
		}
	}
	return out
}

// testQueueModel runs long random sequences of queue operations (enqueue
// alone and in Updates that fail, receive, ack, release, retry, pop,
// requeue of dead letters, an ack in an Update that commits after a later
// pop, leases ending as an injected clock moves, restarts) against a queue
// and an in-memory model, and compares Len, Peek and the dead letters
// after every step, and the tail after every restart. Leases live in
// memory on Pebble (a restart ends them) and in the store on a shared
// engine (a restart keeps them, held by nobody). Replay a failure with
// -queue.model.seed.
func testQueueModel(t *testing.T, b backend) { runQueueModels(t, b, "Model", false) }

// testQueueModelGroups is testQueueModel with message groups: each
// enqueue puts its messages in one of three groups or none, under a group
// window of 1 to 3, and the model delivers a group's message only inside
// its window (see queue.Options.GroupWindow).
func testQueueModelGroups(t *testing.T, b backend) { runQueueModels(t, b, "ModelGroups", true) }

// testQueueModelGroupsShortRuns is testQueueModelGroups where shared
// engines remember runs of two messages behind their groups' windows
// (knobs.Queue.BlockedRunMin), so that the model meets the hint all the
// time. Exclusive engines keep no such hint: it skips there.
func testQueueModelGroupsShortRuns(t *testing.T, b backend) {
	if !qShared(t, b.Open(t, nil)) {
		t.Skip("an exclusive engine keeps no runs of blocked messages")
	}
	runQueueModels(t, b, "ModelGroupsShortRuns", true)
}

func runQueueModels(t *testing.T, b backend, name string, groups bool) {
	seeds := []uint64{*queueModelSeed}
	switch {
	case seeds[0] != 0:
	case groups && testing.Short():
		// The group models walk the model's paths again with groups on:
		// one seed each under -short, three at full size.
		seeds = []uint64{rand.Uint64()}
	default:
		seeds = []uint64{rand.Uint64(), rand.Uint64(), rand.Uint64()}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test -run 'TestConformance.*/Queues/%s' -queue.model.seed %d", name, seed)
			runQueueModel(t, b, seed, b.N(1500), groups)
		})
	}
}

func runQueueModel(t *testing.T, b backend, seed uint64, steps int, groups bool) {
	rng := rand.New(rand.NewPCG(seed, 3))
	clock := newQClock()
	opts := &tipkv.Options{NoSync: true, Clock: clock.Now}
	db := b.Open(t, opts)
	caps := Caps(t, db)
	qopts := &queue.Options[int64]{MaxAttempts: 3}
	window := 1
	if groups {
		window = 1 + rng.IntN(3)
		qopts.GroupWindow = window
		t.Logf("group window %d", window)
	}
	q := qOpen(t, db, "model", qopts)
	m := &queueModel{maxAttempts: 3, now: clock.Now, lapse: qLapse(t, db), window: window}
	group := "" // the group of the next enqueue
	leases := []time.Duration{time.Minute, time.Hour}
	nextSeq, nextVal := int64(-1), int64(0) // the first enqueue tells the seq base

	// enqueue enqueues n new values through w and returns the first's
	// sequence number.
	enqueue := func(w tipkv.Writer, n int) (int64, error) {
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = nextVal
			nextVal++
		}
		return q.EnqueueWith(w, queue.EnqueueOptions{Group: group}, vals...)
	}
	// enqueueOK enqueues n messages on the DB, in the model too. Their
	// numbers go on from the last enqueue's.
	enqueueOK := func(step, n int) {
		firstVal := nextVal
		first, err := enqueue(db, n)
		require.NoError(t, err, "step %d: enqueue", step)
		if nextSeq >= 0 {
			require.Equal(t, nextSeq, first, "step %d: enqueue: the first sequence number", step)
		}
		for i := range n {
			m.live = append(m.live, &qmsg{seq: first + int64(i), value: firstVal + int64(i), group: group})
		}
		nextSeq = first + int64(n)
	}
	restart := func(step int) {
		if b.Reopen == nil {
			return
		}
		db = b.Reopen(t, db, opts)
		var err error
		q, err = queue.Open[int64](db, "model", qopts)
		require.NoError(t, err)
		for _, x := range m.live {
			if x.leased {
				if caps.Shared {
					x.id = queue.ID{} // in the store, held by the process that went
				} else {
					x.leased, x.id, x.until = false, queue.ID{}, time.Time{} // in memory: gone
				}
			}
		}
		if nextSeq >= 0 {
			require.Equal(t, nextSeq, q.Stats().Tail, "step %d: restart: the tail goes on where it was", step)
		}
	}
	for step := range steps {
		if groups {
			group = []string{"", "a", "b", "c"}[rng.IntN(4)]
		}
		var op string
		switch r := rng.IntN(100); {
		case r < 25:
			n := 1 + rng.IntN(5)
			op = fmt.Sprintf("enqueue %d", n)
			enqueueOK(step, n)
		case r < 30:
			op = "enqueue in a failing update"
			boom := errors.New("boom")
			var lost int64
			err := db.Update(func(b *tipkv.Batch) error {
				var err error
				if lost, err = enqueue(b, 2); err != nil {
					return err
				}
				return boom
			})
			require.ErrorIs(t, err, boom)
			if nextSeq >= 0 {
				require.Equal(t, nextSeq, lost, "step %d: %s: the first sequence number", step, op)
			}
			// The values are skipped. No message has their numbers: an
			// exclusive engine skips them too, a shared one gives them to
			// the next enqueue.
			nextSeq = lost
			if !caps.Shared {
				nextSeq += 2
			}
		case r < 45:
			n := 1 + rng.IntN(4)
			lease := leases[rng.IntN(len(leases))]
			op = fmt.Sprintf("receive %d for %v", n, lease)
			got, err := q.Receive(n, lease)
			require.NoError(t, err)
			want := m.deliver(n)
			require.Len(t, got, len(want), "step %d: %s", step, op)
			for i, g := range got {
				require.Equal(t, want[i].seq, g.Seq, "step %d: %s", step, op)
				require.Equal(t, want[i].value, g.Value)
				require.Equal(t, want[i].attempts, g.Attempts)
				want[i].leased, want[i].id, want[i].until = true, g.ID, clock.Now().Add(lease)
			}
		case r < 48:
			d := []time.Duration{30 * time.Second, 61 * time.Second, 5 * time.Minute, 2 * time.Hour}[rng.IntN(4)]
			op = fmt.Sprintf("clock +%v", d)
			clock.Advance(d)
		case r < 51:
			op = "retry"
			if h := m.held(); len(h) > 0 {
				x := h[0]
				require.NoError(t, q.Retry(x.id), "step %d: retry", step)
				x.leased, x.id, x.until = false, queue.ID{}, time.Time{}
				if x.attempts < m.maxAttempts {
					x.until = clock.Now().Add(queue.DefaultBackoff(x.attempts))
				}
			}
		case r < 54:
			k, n := rng.IntN(3), 1+rng.IntN(8)
			if rng.IntN(2) == 0 && !(groups && caps.MaxBatchOps > 0) {
				// Everything visible, the new messages too. (Not where
				// the Pop takes several calls and groups are on: each
				// call's pops open their groups' windows for the next.)
				n = 1 << 20
			}
			op = fmt.Sprintf("ack in an Update that commits after an enqueue %d and a pop %d", k, n)
			var ids []queue.ID
			for _, x := range m.held() {
				if rng.IntN(2) == 0 {
					ids = append(ids, x.id)
				}
			}
			inside, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			done := make(chan error)
			go func() {
				done <- db.Update(func(b *tipkv.Batch) error {
					err := q.Ack(b, ids...)
					once.Do(func() { close(inside) })
					<-release
					return err
				})
			}()
			<-inside
			if k > 0 {
				enqueueOK(step, k)
			}
			got, err := q.Pop(n)
			require.NoError(t, err)
			for n == 1<<20 && caps.MaxBatchOps > 0 { // one batch of the engine holds less
				more, err := q.Pop(20)
				require.NoError(t, err)
				if len(more) == 0 {
					break
				}
				got = append(got, more...)
			}
			want := m.deliver(n) // the acked messages are still leased
			require.Len(t, got, len(want), "step %d: %s", step, op)
			for i, g := range got {
				require.Equal(t, want[i].seq, g.Seq, "step %d: %s", step, op)
				m.remove(want[i].seq)
			}
			close(release)
			require.NoError(t, <-done, "step %d: %s", step, op)
			for _, id := range ids {
				m.remove(id.Seq())
			}
			if rng.IntN(2) == 0 {
				op += ", restart"
				restart(step)
			}
		case r < 65:
			op = "ack"
			var ids []queue.ID
			for _, x := range m.held() {
				if rng.IntN(2) == 0 {
					ids = append(ids, x.id)
				}
			}
			if len(ids) == 0 {
				continue
			}
			require.NoError(t, q.Ack(db, ids...), "step %d: ack", step)
			for _, id := range ids {
				m.remove(id.Seq())
			}
		case r < 72:
			op = "release"
			if h := m.held(); len(h) > 0 {
				require.NoError(t, q.Release(h[0].id, 0))
				h[0].leased, h[0].id, h[0].until = false, queue.ID{}, time.Time{}
			}
		case r < 80:
			n := 1 + rng.IntN(3)
			op = fmt.Sprintf("pop %d", n)
			got, err := q.Pop(n)
			require.NoError(t, err)
			want := m.deliver(n)
			require.Len(t, got, len(want), "step %d: %s", step, op)
			for i, g := range got {
				require.Equal(t, want[i].seq, g.Seq, "step %d: %s", step, op)
				require.Equal(t, want[i].value, g.Value)
				m.remove(want[i].seq)
			}
		case r < 85:
			op = "requeue a dead letter"
			if len(m.dead) == 0 {
				continue
			}
			d := m.dead[0]
			require.NoError(t, q.Requeue(db, d.seq))
			m.dead = m.dead[1:]
			newSeq := q.Stats().Tail - 1 // requeued to the tail
			msgs, err := q.Inspect(newSeq-1, 1)
			require.NoError(t, err)
			require.Len(t, msgs, 1)
			require.Equal(t, newSeq, msgs[0].Seq)
			require.Equal(t, d.value, msgs[0].Value)
			require.Equal(t, d.group, msgs[0].Group)
			m.live = append(m.live, &qmsg{seq: newSeq, value: d.value, group: d.group})
			nextSeq = newSeq + 1
		case r < 88:
			op = "restart"
			restart(step)
		default:
			op = "peek"
		}
		compareQueue(t, step, op, q, m)
	}
	Healthy(t, db)
}

func compareQueue(t *testing.T, step int, op string, q *queue.Queue[int64], m *queueModel) {
	t.Helper()
	require.Equal(t, len(m.live), q.Len(), "step %d after %s: Len", step, op)
	got, err := q.Peek(1 << 20)
	require.NoError(t, err)
	want := m.visible()
	require.Len(t, got, len(want), "step %d after %s: Peek", step, op)
	for i, g := range got {
		require.Equal(t, want[i].seq, g.Seq, "step %d after %s: Peek[%d]", step, op, i)
		require.Equal(t, want[i].value, g.Value, "step %d after %s: Peek[%d]", step, op, i)
		require.Equal(t, want[i].attempts, g.Attempts, "step %d after %s: Peek[%d] attempts", step, op, i)
		require.Equal(t, want[i].group, g.Group, "step %d after %s: Peek[%d] group", step, op, i)
	}
	var dead []int64
	for d, err := range q.DeadLetters() {
		require.NoError(t, err)
		dead = append(dead, d.Value)
	}
	var wantDead []int64
	for _, d := range m.dead {
		wantDead = append(wantDead, d.value)
	}
	require.Equal(t, wantDead, dead, "step %d after %s: dead letters", step, op)
}
