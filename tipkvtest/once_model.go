package tipkvtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/once"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

var onceModelSeed = flag.Uint64("once.model.seed", 0, "replay one idempotency model seed (conformance)")

// testOnceModel runs long random sequences over two queues, a feed stream
// and a collection guarded by a few idempotency keys of every scope
// (EnqueueOnce with the same content and other content, on the DB and in
// Updates, some failing; AppendOnce, PutOnce) mixed with everything that
// happens to a queue message (receive, release, retry, ack, pop, leases
// and windows ending as an injected clock moves, dead letters after
// MaxAttempts, requeue, discard), the guarded data going (Trim, document
// Delete and Purge), ForgetKey, sweeps and restarts; on a shared engine a
// second DB, as another process, makes some of the enqueues. A model
// of tipkv.Scope's table says what every guarded write must return (the
// first result, a new one, or the mismatch error); after every step the
// queues are compared with their models (queues_model.go) and every key
// record in the store with the model's; at the end, once everything is
// consumed and every window passed, a sweep must leave only the
// until-forgotten keys. Replay a failure with -once.model.seed.
func testOnceModel(t *testing.T, b backend) {
	seeds := []uint64{*onceModelSeed}
	if seeds[0] == 0 {
		seeds = []uint64{rand.Uint64(), rand.Uint64()}
	}
	steps := b.N(1200)
	if testing.Short() {
		steps = b.N(400)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test -run 'TestConformance.*/Once/OnceModel' -once.model.seed %d", seed)
			runOnceModel(t, b, seed, steps)
		})
	}
}

// The model's sizes: a few keys per queue so that keys meet every
// transition, windows that the clock's steps straddle.
const (
	omKeys        = 6
	omMaxAttempts = 3
)

var (
	omQueues  = []string{"qa", "qb"}
	omWindows = []time.Duration{2 * time.Minute, 10 * time.Minute}
)

func runOnceModel(t *testing.T, b backend, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 27))
	clock := newQClock()
	opts := &tipkv.Options{NoSync: true, Clock: clock.Now}
	db := b.Open(t, opts)
	caps := Caps(t, db)
	m := &onceModel{now: clock.Now, queues: map[string]*queueModel{}, recs: map[onceName]*onceRec{}}
	qopts := &queue.Options[int64]{MaxAttempts: omMaxAttempts}
	qs := map[string]*queue.Queue[int64]{}
	nextSeq := map[string]int64{} // -1 until the first enqueue tells the base
	var feed *versioned.Feed[int64]
	var docs *versioned.Collection[int64]
	open := func() {
		for _, name := range omQueues {
			qs[name] = qOpen(t, db, name, qopts)
		}
		var err error
		feed, err = versioned.NewFeed[int64](db, nil)
		require.NoError(t, err)
		docs, err = versioned.NewCollection[int64](db, "docs", nil)
		require.NoError(t, err)
	}
	open()
	// On a shared engine a second DB, as another process, makes some of
	// the guarded enqueues: a key one process wrote holds in the other.
	var qs2 map[string]*queue.Queue[int64]
	var db2 *tipkv.DB
	if b.Second != nil {
		db2 = b.Second(t, db, opts)
		qs2 = map[string]*queue.Queue[int64]{}
		for _, name := range omQueues {
			qs2[name] = qOpen(t, db2, name, qopts)
		}
	}
	for _, name := range omQueues {
		m.queues[name] = &queueModel{maxAttempts: omMaxAttempts, now: clock.Now, lapse: qLapse(t, db)}
		nextSeq[name] = -1
	}
	lastPos := int64(0)               // the feed's last position
	docVersions := map[string]int64{} // each document's last version, 0 once purged
	docDeleted := map[string]bool{}

	// scopeFor returns key k's usual scope, and now and then another.
	scopeFor := func(k int, queue bool) tipkv.Scope {
		if rng.IntN(5) == 0 {
			k = rng.IntN(3)
		}
		switch k % 3 {
		case 0:
			return tipkv.Window(omWindows[rng.IntN(len(omWindows))])
		case 1:
			if queue {
				return tipkv.UntilDone()
			}
			return tipkv.Window(omWindows[rng.IntN(len(omWindows))])
		}
		return tipkv.UntilForgotten()
	}
	// record notes a new record of n in the model.
	record := func(n onceName, sc tipkv.Scope, result, value int64) {
		r := &onceRec{result: result, value: value, kind: sc.Kind()}
		if r.kind == tipkv.ScopeWindow {
			r.due = clock.Now().Add(sc.Duration())
		}
		m.recs[n] = r
	}
	// enqueued checks and notes a message the store numbered seq.
	enqueued := func(step int, op, qn string, seq, value int64) {
		if nextSeq[qn] >= 0 {
			require.Equal(t, nextSeq[qn], seq, "step %d: %s: a new message's number", step, op)
		}
		m.queues[qn].live = append(m.queues[qn].live, &qmsg{seq: seq, value: value})
		nextSeq[qn] = seq + 1
	}
	// seen counts the outcomes the run met, for its log: a run that never
	// meets a row of the table proves nothing about it.
	seen := map[string]int{}
	// checkOnce compares a guarded write's outcome with the model's want.
	checkOnce := func(step int, op string, n onceName, w onceWant, result int64, dup bool, err error) {
		t.Helper()
		switch r, ok := m.recs[n]; {
		case w.mismatch:
			seen["mismatch"]++
		case w.dup:
			seen["dup "+once.Kind(r.kind).String()]++
		case ok:
			seen["ended "+once.Kind(r.kind).String()]++
		default:
			seen["new"]++
		}
		if w.mismatch {
			require.ErrorIs(t, err, tipkv.ErrIdempotencyMismatch, "step %d: %s: the key holds for other content", step, op)
			return
		}
		require.NoError(t, err, "step %d: %s", step, op)
		require.Equal(t, w.dup, dup, "step %d: %s: dup", step, op)
		if w.dup {
			require.Equal(t, w.result, result, "step %d: %s: the first write's result", step, op)
		}
	}
	restart := func(step int) {
		if b.Reopen == nil {
			return
		}
		db = b.Reopen(t, db, opts)
		open()
		for _, qm := range m.queues {
			for _, x := range qm.live {
				if x.leased {
					if caps.Shared {
						x.id = queue.ID{} // in the store, held by the process that went
					} else {
						x.leased, x.id, x.until = false, queue.ID{}, time.Time{} // in memory: gone
					}
				}
			}
		}
	}
	// heldMsgs returns the messages of qn whose lease this process holds.
	heldMsgs := func(qn string) []*qmsg { return m.queues[qn].held() }

	for step := range steps {
		qn := omQueues[rng.IntN(len(omQueues))]
		q, qm := qs[qn], m.queues[qn]
		k := rng.IntN(omKeys)
		key := fmt.Sprint("k", k)
		variant := int64(0)
		if rng.IntN(6) == 0 {
			variant = 1
		}
		value := int64(10*k) + variant
		n := onceName{once.SpaceQueue, qn, key}
		// wdb and wq make the guarded enqueues: now and then the other
		// process.
		wdb, wq, by := db, q, ""
		if db2 != nil && rng.IntN(3) == 0 {
			wdb, wq, by = db2, qs2[qn], " by the second DB"
		}
		var op string
		switch r := rng.IntN(100); {
		case r < 22:
			sc := scopeFor(k, true)
			op = fmt.Sprintf("enqueue once %s %s %s value %d%s", qn, key, sc, value, by)
			w := m.want(n, value)
			seq, dup, err := wq.EnqueueOnce(wdb, key, sc, value)
			checkOnce(step, op, n, w, seq, dup, err)
			if err == nil && !dup {
				enqueued(step, op, qn, seq, value)
				record(n, sc, seq, value)
			}
		case r < 28:
			// In an Update, twice, with a plain enqueue between: the
			// second is the first's duplicate (or its mismatch).
			sc := scopeFor(k, true)
			op = fmt.Sprintf("enqueue once %s %s %s value %d twice in an update%s", qn, key, sc, value, by)
			w := m.want(n, value)
			var seq, seq2, plain int64
			var dup, dup2 bool
			err := wdb.Update(func(b *tipkv.Batch) error {
				var err error
				if seq, dup, err = wq.EnqueueOnce(b, key, sc, value); err != nil {
					return err
				}
				if plain, err = wq.Enqueue(b, 999); err != nil {
					return err
				}
				seq2, dup2, err = wq.EnqueueOnce(b, key, sc, value)
				return err
			})
			checkOnce(step, op, n, w, seq, dup, err)
			if err == nil {
				require.True(t, dup2, "step %d: %s: the second is a duplicate", step, op)
				require.Equal(t, seq, seq2, "step %d: %s", step, op)
				if !dup {
					enqueued(step, op, qn, seq, value)
					record(n, sc, seq, value)
				}
				enqueued(step, op, qn, plain, 999)
			}
		case r < 31:
			sc := scopeFor(k, true)
			op = fmt.Sprintf("enqueue once %s %s %s in a failing update%s", qn, key, sc, by)
			w := m.want(n, value)
			boom := errors.New("boom")
			var seq int64
			var dup bool
			err := wdb.Update(func(b *tipkv.Batch) error {
				var err error
				if seq, dup, err = wq.EnqueueOnce(b, key, sc, value); err != nil {
					return err
				}
				return boom
			})
			if w.mismatch {
				require.ErrorIs(t, err, tipkv.ErrIdempotencyMismatch, "step %d: %s", step, op)
				break
			}
			require.ErrorIs(t, err, boom, "step %d: %s", step, op)
			require.Equal(t, w.dup, dup, "step %d: %s: dup", step, op)
			if w.dup {
				require.Equal(t, w.result, seq, "step %d: %s", step, op)
			} else if nextSeq[qn] >= 0 && !caps.Shared {
				// The number is skipped on an exclusive engine. On a
				// shared one it was a guess that never committed (the
				// store numbers a message at commit), and the next
				// enqueue takes it.
				require.Equal(t, nextSeq[qn], seq, "step %d: %s", step, op)
				nextSeq[qn]++
			}
		case r < 33:
			op = "enqueue " + qn
			seq, err := q.Enqueue(db, 999)
			require.NoError(t, err, "step %d: %s", step, op)
			enqueued(step, op, qn, seq, 999)
		case r < 45:
			n := 1 + rng.IntN(3)
			lease := []time.Duration{time.Minute, time.Hour}[rng.IntN(2)]
			op = fmt.Sprintf("receive %d from %s for %v", n, qn, lease)
			got, err := q.Receive(n, lease)
			require.NoError(t, err, "step %d: %s", step, op)
			want := qm.deliver(n)
			require.Len(t, got, len(want), "step %d: %s", step, op)
			for i, g := range got {
				require.Equal(t, want[i].seq, g.Seq, "step %d: %s", step, op)
				require.Equal(t, want[i].attempts, g.Attempts, "step %d: %s", step, op)
				want[i].leased, want[i].id, want[i].until = true, g.ID, clock.Now().Add(lease)
			}
		case r < 50:
			d := []time.Duration{30 * time.Second, 61 * time.Second, 5 * time.Minute, 11 * time.Minute, 2 * time.Hour}[rng.IntN(5)]
			op = fmt.Sprintf("clock +%v", d)
			clock.Advance(d)
		case r < 53:
			op = "retry " + qn
			if h := heldMsgs(qn); len(h) > 0 {
				x := h[rng.IntN(len(h))]
				require.NoError(t, q.Retry(x.id), "step %d: %s", step, op)
				x.leased, x.id, x.until = false, queue.ID{}, time.Time{}
				if x.attempts < qm.maxAttempts {
					x.until = clock.Now().Add(queue.DefaultBackoff(x.attempts))
				}
			}
		case r < 57:
			op = "release " + qn
			if h := heldMsgs(qn); len(h) > 0 {
				x := h[rng.IntN(len(h))]
				require.NoError(t, q.Release(x.id, 0), "step %d: %s", step, op)
				x.leased, x.id, x.until = false, queue.ID{}, time.Time{}
			}
		case r < 64:
			op = "ack " + qn
			var ids []queue.ID
			for _, x := range heldMsgs(qn) {
				if rng.IntN(2) == 0 {
					ids = append(ids, x.id)
				}
			}
			if len(ids) == 0 {
				break
			}
			require.NoError(t, q.Ack(db, ids...), "step %d: %s", step, op)
			for _, id := range ids {
				qm.remove(id.Seq())
			}
		case r < 68:
			n := 1 + rng.IntN(2)
			op = fmt.Sprintf("pop %d from %s", n, qn)
			got, err := q.Pop(n)
			require.NoError(t, err, "step %d: %s", step, op)
			want := qm.deliver(n)
			require.Len(t, got, len(want), "step %d: %s", step, op)
			for i, g := range got {
				require.Equal(t, want[i].seq, g.Seq, "step %d: %s", step, op)
				qm.remove(want[i].seq)
			}
		case r < 71:
			op = "requeue a dead letter of " + qn
			if len(qm.dead) == 0 {
				break
			}
			d := qm.dead[rng.IntN(len(qm.dead))]
			require.NoError(t, q.Requeue(db, d.seq), "step %d: %s", step, op)
			seen["requeue"]++
			qm.dead = deleteDead(qm.dead, d.seq)
			msgs, err := q.Peek(1 << 20)
			require.NoError(t, err)
			last := msgs[len(msgs)-1] // requeued to the tail
			require.Equal(t, d.value, last.Value, "step %d: %s", step, op)
			enqueued(step, op, qn, last.Seq, d.value)
		case r < 74:
			op = "discard a dead letter of " + qn
			if len(qm.dead) == 0 {
				break
			}
			d := qm.dead[rng.IntN(len(qm.dead))]
			require.NoError(t, q.Discard(db, d.seq), "step %d: %s", step, op)
			seen["discard"]++
			qm.dead = deleteDead(qm.dead, d.seq)
		case r < 79:
			op = fmt.Sprintf("forget %s %s", qn, key)
			_, holds := m.held(n)
			held, err := q.ForgetKey(db, key)
			require.NoError(t, err, "step %d: %s", step, op)
			require.Equal(t, holds, held, "step %d: %s: whether the key held", step, op)
			seen[fmt.Sprint("forget held=", held)]++
			delete(m.recs, n)
		case r < 82:
			op = "sweep"
			_, err := db.SweepKeys(context.Background())
			require.NoError(t, err, "step %d: %s", step, op)
			compareOnceKeys(t, step, op, db, m, true)
			seen["sweep"]++
		case r < 84:
			op = "restart"
			restart(step)
			seen["restart"]++
		case r < 89:
			ek := fmt.Sprint("e", k%3)
			sc := scopeFor(k, false)
			n := onceName{once.SpaceStream, "s", ek}
			op = fmt.Sprintf("append once %s %s value %d", ek, sc, value)
			w := m.want(n, value)
			pos, dup, err := feed.AppendOnce(db, "s", ek, sc, value)
			checkOnce(step, op, n, w, pos, dup, err)
			if err == nil && !dup {
				require.Greater(t, pos, lastPos, "step %d: %s: a new position", step, op)
				lastPos = pos
				record(n, sc, pos, value)
			}
		case r < 90:
			// The key outlives its event. Trim keeps the newest event:
			// a stream trimmed empty, then reopened, may number its next
			// event as the trimmed last one when the clock has not moved
			// (positions are times), which this test is not about.
			op = "trim the feed"
			require.NoError(t, feed.Trim(db, "s", 1), "step %d: %s", step, op)
		case r < 95:
			dk := fmt.Sprint("p", k%3)
			sc := scopeFor(k, false)
			n := onceName{once.SpaceCollection, "docs", dk}
			id := fmt.Sprint("doc", k%2) // two keys write one document
			op = fmt.Sprintf("put once %s %s %s value %d", id, dk, sc, value)
			w := m.want(n, value)
			v, dup, err := docs.PutOnce(db, id, dk, sc, value)
			checkOnce(step, op, n, w, v, dup, err)
			if err == nil && !dup {
				docVersions[id]++
				docDeleted[id] = false
				require.Equal(t, docVersions[id], v, "step %d: %s: the document's next version", step, op)
				record(n, sc, v, value)
			}
		case r < 96:
			// The document goes; its keys hold (they go on returning
			// the versions they wrote).
			id := fmt.Sprint("doc", k%2)
			if rng.IntN(2) == 0 {
				op = "delete " + id
				v, err := docs.Delete(db, id)
				require.NoError(t, err, "step %d: %s", step, op)
				if docVersions[id] > 0 && !docDeleted[id] {
					docVersions[id]++
					docDeleted[id] = true
				}
				require.Equal(t, docVersions[id], v, "step %d: %s: the marker's version", step, op)
			} else {
				op = "purge " + id
				_, err := docs.Purge(db, id)
				require.NoError(t, err, "step %d: %s", step, op)
				docVersions[id], docDeleted[id] = 0, false
			}
		case r < 98:
			var held bool
			var err error
			var n onceName
			if rng.IntN(2) == 0 {
				n = onceName{once.SpaceStream, "s", fmt.Sprint("e", k%3)}
				held, err = feed.ForgetKey(db, "s", n.key)
			} else {
				n = onceName{once.SpaceCollection, "docs", fmt.Sprint("p", k%3)}
				held, err = docs.ForgetKey(db, n.key)
			}
			op = fmt.Sprintf("forget %s %s", n.space, n.key)
			_, holds := m.held(n)
			require.NoError(t, err, "step %d: %s", step, op)
			require.Equal(t, holds, held, "step %d: %s: whether the key held", step, op)
			seen[fmt.Sprint("forget held=", held)]++
			delete(m.recs, n)
		default:
			op = "peek"
		}
		for _, name := range omQueues {
			compareQueue(t, step, op, qs[name], m.queues[name])
		}
		compareOnceKeys(t, step, op, db, m, false)
	}

	t.Logf("guarded writes: %v", seen)

	// The end: everything consumed, every window passed; a sweep leaves
	// only the until-forgotten keys.
	clock.Advance(3 * time.Hour)
	for _, name := range omQueues {
		q, qm := qs[name], m.queues[name]
		for {
			got, err := q.Pop(20)
			require.NoError(t, err)
			if len(got) == 0 {
				break
			}
			for _, g := range got {
				qm.remove(g.Seq)
			}
		}
		qm.expire()
		qm.deliver(1 << 20) // those delivered MaxAttempts times became dead letters
		require.Empty(t, qm.live)
		for len(qm.dead) > 0 {
			n := min(len(qm.dead), 20)
			seqs := make([]int64, n)
			for i, d := range qm.dead[:n] {
				seqs[i] = d.seq
			}
			require.NoError(t, q.Discard(db, seqs...))
			qm.dead = qm.dead[n:]
		}
		compareQueue(t, steps, "drain", q, qm)
	}
	_, err := db.SweepKeys(context.Background())
	require.NoError(t, err)
	compareOnceKeys(t, steps, "the last sweep", db, m, true)
	forgotten := 0
	for _, r := range m.recs {
		if r.kind == tipkv.ScopeUntilForgotten {
			forgotten++
		}
	}
	require.Equal(t, forgotten, onceKeys(t, db), "only the until-forgotten records are left, and no index entry")
	Healthy(t, db)
}

func deleteDead(dead []qmsg, seq int64) []qmsg {
	out := dead[:0]
	for _, d := range dead {
		if d.seq != seq {
			out = append(out, d)
		}
	}
	return out
}
