// Package workload is the mixed workload the crash and kill tests run
// (tests/crash, tests/kill): document Puts, feed Appends, queue Enqueue,
// Receive and Ack, and outbox Updates (an order version and its event in
// one batch), driven by a seeded random generator. Each operation that
// returns successfully is logged as one line; a checker rebuilds what was
// acknowledged from the lines and compares it with a reopened store. The
// same workload runs in-process on a crashable file system and in a child
// process killed with SIGKILL.
package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

type order struct {
	Total int `msgpack:"total"`
}

type event struct {
	N       int64  `msgpack:"n"`       // unique over the run
	Order   string `msgpack:"order"`   // outbox events only
	Version int64  `msgpack:"version"` // outbox events only
}

// workloadDocs is how many documents each collection of the workload
// writes: few, so that versions pile up.
const workloadDocs = 6

// Workload runs random operations on one DB, logging each. It is not safe
// for concurrent use.
type Workload struct {
	db     *tipkv.DB
	docs   *versioned.Collection[order]
	orders *versioned.Collection[order]
	feed   *versioned.Feed[int64]
	q      *queue.Queue[event]
	rng    *rand.Rand
	next   int64 // next unique event number
	log    func(line string)
}

// New returns a workload on db drawing from rng, whose event numbers start
// at start (a later run on the same store starts past the earlier ones'),
// logging each operation to log.
func New(db *tipkv.DB, rng *rand.Rand, start int64, log func(string)) (*Workload, error) {
	w := &Workload{db: db, rng: rng, next: start, log: log}
	var err error
	if w.docs, err = versioned.NewCollection[order](db, "docs", nil); err != nil {
		return nil, err
	}
	if w.orders, err = versioned.NewCollection[order](db, "orders", nil); err != nil {
		return nil, err
	}
	if w.feed, err = versioned.NewFeed[int64](db, nil); err != nil {
		return nil, err
	}
	if w.q, err = queue.Open[event](db, "events", nil); err != nil {
		return nil, err
	}
	return w, nil
}

// Step runs one random operation and logs it once it has returned. Before
// an operation starts it logs "try ..." so the checker knows what may be in
// flight when a process is killed.
func (w *Workload) Step() error {
	switch op := w.rng.IntN(10); {
	case op < 2:
		id := fmt.Sprintf("doc-%d", w.rng.IntN(workloadDocs))
		w.log("try put docs " + id)
		v, err := w.docs.Put(w.db, id, order{Total: w.rng.IntN(100)})
		if err != nil {
			return err
		}
		w.log(fmt.Sprintf("put docs %s %d", id, v))
	case op < 4:
		n := w.next
		w.next++
		w.log(fmt.Sprintf("try append %d", n))
		pos, err := w.feed.Append(w.db, "stream", n)
		if err != nil {
			return err
		}
		w.log(fmt.Sprintf("append %d %d", n, pos))
	case op < 6:
		k := 1 + w.rng.IntN(5)
		evs := make([]event, k)
		var ns []string
		for i := range evs {
			evs[i] = event{N: w.next}
			ns = append(ns, strconv.FormatInt(w.next, 10))
			w.next++
		}
		w.log("try enq " + strings.Join(ns, " "))
		if _, err := w.q.Enqueue(w.db, evs...); err != nil {
			return err
		}
		w.log("enq " + strings.Join(ns, " "))
	case op < 8:
		msgs, err := w.q.Receive(1+w.rng.IntN(8), time.Minute)
		if err != nil {
			return err
		}
		if len(msgs) > 0 {
			w.log(fmt.Sprintf("recv %d", msgs[len(msgs)-1].Seq))
		}
		var ids []queue.ID
		var ns []string
		for _, m := range msgs {
			if w.rng.IntN(4) > 0 { // leave some unacknowledged: redelivered after the crash
				ids = append(ids, m.ID)
				ns = append(ns, strconv.FormatInt(m.Value.N, 10))
			}
		}
		if len(ids) == 0 {
			return nil
		}
		w.log("try ack " + strings.Join(ns, " "))
		if err := w.q.Ack(w.db, ids...); err != nil {
			return err
		}
		w.log("ack " + strings.Join(ns, " "))
	default:
		id := fmt.Sprintf("order-%d", w.rng.IntN(workloadDocs))
		n := w.next
		w.next++
		w.log(fmt.Sprintf("try outbox %s %d", id, n))
		var v int64
		err := w.db.Update(func(b *tipkv.Batch) error {
			var err error
			if v, err = w.orders.Put(b, id, order{Total: int(n)}); err != nil {
				return err
			}
			_, err = w.q.Enqueue(b, event{N: n, Order: id, Version: v})
			return err
		})
		if err != nil {
			return err
		}
		w.log(fmt.Sprintf("outbox %s %d %d", id, v, n))
	}
	return nil
}

// Acked is what a workload's log says was acknowledged, and what may have
// been in flight.
type Acked struct {
	versions map[string]int64 // collection/id -> latest acknowledged version
	inflight map[string]int64 // collection/id -> Puts tried since the last acknowledged one
	feed     map[int64]bool   // event numbers appended
	feedTry  map[int64]bool   // event numbers whose Append was tried
	enq      map[int64]bool   // event numbers enqueued (plain and outbox)
	enqTry   map[int64]bool   // event numbers whose enqueue was tried
	consumed map[int64]bool   // event numbers acknowledged by the consumer
	ackTry   map[int64]bool   // event numbers whose Ack was tried
	outbox   map[int64]string // outbox event number -> "order-id version"
	received int64            // the greatest sequence number delivered
}

// ParseLog reads what a workload logged (the lines of one run or of
// several, in order).
func ParseLog(lines []string) (*Acked, error) {
	a := &Acked{
		versions: map[string]int64{}, inflight: map[string]int64{},
		feed: map[int64]bool{}, feedTry: map[int64]bool{},
		enq: map[int64]bool{}, enqTry: map[int64]bool{},
		consumed: map[int64]bool{}, ackTry: map[int64]bool{}, outbox: map[int64]string{},
	}
	nums := func(fs []string) []int64 {
		out := make([]int64, 0, len(fs))
		for _, f := range fs {
			n, _ := strconv.ParseInt(f, 10, 64)
			out = append(out, n)
		}
		return out
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch {
		case f[0] == "try" && f[1] == "put":
			a.inflight[f[2]+"/"+f[3]]++
		case f[0] == "try" && f[1] == "append":
			a.feedTry[nums(f[2:3])[0]] = true
		case f[0] == "try" && f[1] == "enq":
			for _, n := range nums(f[2:]) {
				a.enqTry[n] = true
			}
		case f[0] == "try" && f[1] == "ack":
			for _, n := range nums(f[2:]) {
				a.ackTry[n] = true
			}
		case f[0] == "try" && f[1] == "outbox":
			a.inflight["orders/"+f[2]]++
			a.enqTry[nums(f[3:4])[0]] = true
		case f[0] == "put":
			a.versions[f[1]+"/"+f[2]] = nums(f[3:4])[0]
			delete(a.inflight, f[1]+"/"+f[2])
		case f[0] == "append":
			a.feed[nums(f[1:2])[0]] = true
		case f[0] == "enq":
			for _, n := range nums(f[1:]) {
				a.enq[n] = true
			}
		case f[0] == "ack":
			for _, n := range nums(f[1:]) {
				a.consumed[n] = true
			}
		case f[0] == "recv":
			a.received = max(a.received, nums(f[1:2])[0])
		case f[0] == "outbox":
			v := nums(f[2:3])[0]
			n := nums(f[3:4])[0]
			a.versions["orders/"+f[1]] = v
			delete(a.inflight, "orders/"+f[1])
			a.enq[n] = true
			a.outbox[n] = f[1] + " " + strconv.FormatInt(v, 10)
		default:
			return nil, fmt.Errorf("bad log line %q", line)
		}
	}
	return a, nil
}

// Check compares a reopened store with what was acknowledged. With durable
// (synced writes), everything acknowledged must be there; without, only the
// invariants that hold whatever was lost: dense versions, whole outbox
// batches, nothing that was never written, queue state that agrees with the
// items.
func (a *Acked) Check(db *tipkv.DB, durable bool) error {
	w, err := New(db, rand.New(rand.NewPCG(0, 0)), 0, func(string) {})
	if err != nil {
		return err
	}
	present := map[string][]int64{} // collection/id -> versions, newest first
	for _, c := range []*versioned.Collection[order]{w.docs, w.orders} {
		for i := range workloadDocs {
			id := strings.TrimSuffix(c.Name(), "s") + "-" + strconv.Itoa(i)
			key := c.Name() + "/" + id
			var vs []int64
			for d, err := range c.History(id, tipkv.Query{}) {
				if err != nil {
					return fmt.Errorf("history %s: %w", key, err)
				}
				vs = append(vs, d.Version)
			}
			present[key] = vs
			for j, v := range vs {
				if want := int64(len(vs) - j); v != want {
					return fmt.Errorf("%s: versions %v are not dense 1..%d", key, vs, len(vs))
				}
			}
			latest := int64(len(vs))
			ack := a.versions[key]
			maxV := ack + a.inflight[key]
			if latest > maxV {
				return fmt.Errorf("%s: latest version %d was never acknowledged (acknowledged %d)", key, latest, ack)
			}
			if durable && latest < ack {
				return fmt.Errorf("%s: acknowledged version %d lost, latest is %d", key, ack, latest)
			}
		}
	}

	feed := map[int64]bool{}
	for ev, err := range w.feed.Newest("stream", tipkv.Query{}) {
		if err != nil {
			return fmt.Errorf("feed: %w", err)
		}
		if !a.feed[ev.Value] && !a.feedTry[ev.Value] {
			return fmt.Errorf("feed: event %d was never appended", ev.Value)
		}
		feed[ev.Value] = true
	}
	if durable {
		for n := range a.feed {
			if !feed[n] {
				return fmt.Errorf("feed: acknowledged event %d lost", n)
			}
		}
	}

	msgs, err := w.q.Peek(1 << 30)
	if err != nil {
		return fmt.Errorf("queue peek: %w", err)
	}
	inQueue := map[int64]bool{}
	var seqs []int64
	for _, m := range msgs {
		n := m.Value.N
		if !a.enq[n] && !a.enqTry[n] {
			return fmt.Errorf("queue: message %d was never enqueued", n)
		}
		if inQueue[n] {
			return fmt.Errorf("queue: message %d twice", n)
		}
		if durable && a.consumed[n] {
			return fmt.Errorf("queue: message %d came back after a synced ack", n)
		}
		inQueue[n] = true
		seqs = append(seqs, m.Seq)
		if m.Value.Order != "" { // an outbox event: its order version exists
			vs := present["orders/"+m.Value.Order]
			if int64(len(vs)) < m.Value.Version {
				return fmt.Errorf("outbox: event %d for %s v%d present, the version is not (latest %d)", n, m.Value.Order, m.Value.Version, len(vs))
			}
		}
	}
	if durable {
		for n := range a.enq {
			if !a.consumed[n] && !a.ackTry[n] && !inQueue[n] {
				return fmt.Errorf("queue: message %d lost (enqueued, never acknowledged)", n)
			}
		}
	}
	// An outbox order version that survived has its event, in the queue or
	// consumed.
	for n, ov := range a.outbox {
		var id string
		var v int64
		fmt.Sscanf(ov, "%s %d", &id, &v)
		if int64(len(present["orders/"+id])) >= v && !inQueue[n] && !a.consumed[n] && !a.ackTry[n] {
			return fmt.Errorf("outbox: %s v%d survived without its event %d", id, v, n)
		}
	}
	st := w.q.Stats()
	if st.Len != len(msgs) {
		return fmt.Errorf("queue: Len %d, but %d messages readable", st.Len, len(msgs))
	}
	// A delivery was synced before Receive returned, so a consumer that
	// deduplicates by Seq must never see a number again.
	if durable && st.Tail <= a.received {
		return fmt.Errorf("queue: tail %d would reuse sequence number %d, delivered before", st.Tail, a.received)
	}
	if len(seqs) > 0 {
		if !slices.IsSorted(seqs) {
			return fmt.Errorf("queue: Peek out of order: %v", seqs)
		}
		if st.Head > seqs[0] || st.Tail <= seqs[len(seqs)-1] {
			return fmt.Errorf("queue: head %d, tail %d do not enclose the items %d..%d", st.Head, st.Tail, seqs[0], seqs[len(seqs)-1])
		}
	}
	return nil
}

// RecoveredLog describes a store as a log of acknowledged operations, so a
// run that goes on after a lossy crash can be checked against what the
// store really holds.
func RecoveredLog(db *tipkv.DB) ([]string, error) {
	w, err := New(db, rand.New(rand.NewPCG(0, 0)), 0, func(string) {})
	if err != nil {
		return nil, err
	}
	var lines []string
	msgs, err := w.q.Peek(1 << 30)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if m.Value.Order != "" {
			lines = append(lines, fmt.Sprintf("outbox %s %d %d", m.Value.Order, m.Value.Version, m.Value.N))
		} else {
			lines = append(lines, fmt.Sprintf("enq %d", m.Value.N))
		}
	}
	for _, c := range []*versioned.Collection[order]{w.docs, w.orders} {
		for i := range workloadDocs {
			id := strings.TrimSuffix(c.Name(), "s") + "-" + strconv.Itoa(i)
			d, err := c.Latest(id)
			if errors.Is(err, tipkv.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			lines = append(lines, fmt.Sprintf("put %s %s %d", c.Name(), id, d.Version))
		}
	}
	for ev, err := range w.feed.Newest("stream", tipkv.Query{}) {
		if err != nil {
			return nil, err
		}
		lines = append(lines, fmt.Sprintf("append %d %d", ev.Value, ev.Position))
	}
	return lines, nil
}
