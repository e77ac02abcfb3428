package queue_test

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/check"
	"github.com/tipkv/tipkv/internal/faultstore"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/queuefmt"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/queue"
)

var faultSeed = flag.Uint64("queue.fault.seed", 0, "replay one TestSharedFaults seed")

// faultDelivery is one delivery of a message seen by the fault test.
type faultDelivery struct {
	handle   int
	seq      int64
	attempts int
	id       queue.ID
	deadline time.Time // the lease ends no earlier than this (zero: popped)
	released bool      // a Release of it returned nil or an unknown outcome
	acked    bool      // an Ack of it returned nil
}

// Two processes share a queue through a store whose commits fail at
// random: a condition that fails (another process wrote first), an outcome
// that is unknown after the batch was applied, or after it was lost. One
// goroutine drives both, so that every outcome is known to the test. Where
// the outcome was known, no message is lost, none is delivered twice
// within a lease, none comes back after its Ack or Pop, and no sequence
// number is given twice; after an unknown outcome the queue believes the
// store, not its memory (an Ack that was applied is not applied twice,
// one that was lost still works); and the store ends healthy.
func TestSharedFaults(t *testing.T) {
	seeds := []uint64{*faultSeed}
	if seeds[0] == 0 {
		seeds = []uint64{rand.Uint64(), rand.Uint64()}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test ./queue -run TestSharedFaults -queue.fault.seed %d", seed)
			runSharedFaults(t, seed, 2000)
		})
	}
}

func runSharedFaults(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	clock := newClock()
	ps, err := pebblestore.Open("faults", pebblestore.Config{InMemory: true, CacheSize: 8 << 20, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, err)
	hub := sharedstore.New(ps, sharedstore.Options{NoWatch: true, ClockSkew: time.Second})
	odds := faultstore.Odds{ConditionFailed: 0.1, UnknownApplied: 0.04, UnknownLost: 0.04}
	var fss []*faultstore.Store
	var dbs []*tipkv.DB
	var qs []*queue.Queue[int]
	for i := range 2 {
		fs := faultstore.New(hub.Handle(), faultstore.Odds{}, seed+uint64(i))
		db, err := tipkv.OpenEngine(fs, fmt.Sprint("process-", i), &tipkv.Options{Clock: clock.Now})
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		fs.SetOdds(odds)
		fss, dbs = append(fss, fs), append(dbs, db)
		qs = append(qs, openQ(t, db, "q", &queue.Options[int]{MaxAttempts: -1}))
	}
	raw, err := link.StoreOf(dbs[0])
	require.NoError(t, err)
	// itemState reports whether the store holds d's message, and whether
	// leased as d leased it (nobody delivered it since).
	itemState := func(d *faultDelivery) (present, ours bool) {
		v, err := raw.Get(codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "q"), d.seq))
		if errors.Is(err, engine.ErrNotFound) {
			return false, false
		}
		require.NoError(t, err)
		h, leased, _, err := queuefmt.ParseItem(v)
		require.NoError(t, err)
		return true, leased && h.Attempts == d.attempts
	}
	const lease, skew = time.Minute, time.Second

	enqueued := map[int]string{} // value: "ok", "unknown" or "failed"
	seqOf := map[int64]int{}     // every seq seen, and its value
	valueOf := map[int]int64{}
	deliveries := map[int][]*faultDelivery{} // by value
	gone := map[int]string{}                 // value: how it was consumed for sure ("acked", "popped"), or "maybe"
	next := 0
	unknown := func(err error) bool { return errors.Is(err, engine.ErrUnknownOutcome) }
	see := func(seq int64, v int) {
		if old, ok := seqOf[seq]; ok {
			require.Equal(t, old, v, "sequence number %d given to two messages", seq)
		}
		if old, ok := valueOf[v]; ok {
			require.Equal(t, old, seq, "message %d under two sequence numbers", v)
		}
		seqOf[seq] = v
		valueOf[v] = seq
	}
	deliver := func(h int, ms []queue.Message[int], pop bool) {
		now := clock.Now()
		for _, m := range ms {
			see(m.Seq, m.Value)
			require.NotEqual(t, "failed", enqueued[m.Value], "message %d was never enqueued", m.Value)
			require.NotContains(t, []string{"acked", "popped"}, gone[m.Value], "message %d delivered after it was %s", m.Value, gone[m.Value])
			ds := deliveries[m.Value]
			if len(ds) > 0 {
				last := ds[len(ds)-1]
				if !last.released && !last.deadline.IsZero() {
					require.False(t, now.Before(last.deadline.Add(skew)), "message %d delivered again at %v within the lease of the last delivery (until %v)", m.Value, now, last.deadline)
				}
			}
			d := &faultDelivery{handle: h, seq: m.Seq, attempts: m.Attempts, id: m.ID}
			if !pop {
				d.deadline = now.Add(lease)
			} else {
				gone[m.Value] = "popped"
			}
			deliveries[m.Value] = append(ds, d)
		}
	}
	// held returns a delivery of handle h whose lease it may still act on.
	held := func(h int) *faultDelivery {
		for _, v := range slices.Sorted(maps.Keys(deliveries)) { // in order: a seed replays
			ds := deliveries[v]
			d := ds[len(ds)-1]
			if d.handle == h && !d.deadline.IsZero() && !d.released && !d.acked && gone[v] == "" {
				return d
			}
		}
		return nil
	}

	for step := range steps {
		h := rng.IntN(2)
		q, db := qs[h], dbs[h]
		switch r := rng.IntN(100); {
		case r < 25:
			n := 1 + rng.IntN(4)
			vals := make([]int, n)
			for i := range vals {
				vals[i] = next
				next++
			}
			var err error
			if rng.IntN(2) == 0 {
				_, err = q.Enqueue(db, vals...)
			} else {
				err = db.Update(func(b *tipkv.Batch) error { _, err := q.Enqueue(b, vals...); return err })
			}
			outcome := "ok"
			switch {
			case unknown(err):
				outcome = "unknown"
			case err != nil:
				require.ErrorIs(t, err, tipkv.ErrConflict, "step %d: enqueue", step)
				outcome = "failed"
			}
			for _, v := range vals {
				enqueued[v] = outcome
			}
		case r < 45:
			ms, err := q.Receive(1+rng.IntN(5), lease)
			if err != nil && !unknown(err) {
				require.ErrorIs(t, err, tipkv.ErrConflict, "step %d: receive", step)
			}
			require.True(t, err == nil || len(ms) == 0, "step %d: messages with an error", step)
			deliver(h, ms, false)
		case r < 50:
			before := liveItems(t, raw)
			ms, err := q.Pop(1 + rng.IntN(3))
			switch {
			case unknown(err):
				// What it popped, if anything, is gone without a delivery.
				after := liveItems(t, raw)
				for seq, v := range before {
					if _, ok := after[seq]; !ok {
						see(seq, v)
						gone[v] = "maybe"
					}
				}
			case err != nil:
				require.ErrorIs(t, err, tipkv.ErrConflict, "step %d: pop", step)
			}
			deliver(h, ms, true)
		case r < 70:
			d := held(h)
			if d == nil {
				continue
			}
			var err error
			if rng.IntN(2) == 0 {
				err = q.Ack(db, d.id)
			} else {
				err = db.Update(func(b *tipkv.Batch) error { return q.Ack(b, d.id) })
			}
			v := seqOf[d.seq]
			switch {
			case err == nil:
				d.acked, gone[v] = true, "acked"
			case unknown(err):
				// The queue must believe the store, not its memory: an Ack
				// that was applied is not applied again, one that was lost
				// works, unless the lease went to another delivery since.
				present, ours := itemState(d)
				fss[h].SetOdds(faultstore.Odds{})
				err = q.Ack(db, d.id)
				fss[h].SetOdds(odds)
				switch {
				case ours:
					require.NoError(t, err, "step %d: an Ack that was lost, again", step)
					d.acked, gone[v] = true, "acked"
				case !present:
					require.ErrorIs(t, err, queue.ErrLeaseLost, "step %d: an Ack that was applied, again", step)
					d.acked, gone[v] = true, "acked"
				default:
					require.ErrorIs(t, err, queue.ErrLeaseLost, "step %d: an Ack of a lease taken over", step)
					require.False(t, clock.Now().Before(d.deadline.Add(skew)), "step %d: lease lost before it ended", step)
					d.released = true
				}
			case errors.Is(err, queue.ErrLeaseLost):
				require.False(t, clock.Now().Before(d.deadline.Add(skew)), "step %d: lease lost before it ended", step)
				d.released = true // gone to another delivery
			default:
				require.ErrorIs(t, err, tipkv.ErrConflict, "step %d: ack", step)
			}
		case r < 80:
			d := held(h)
			if d == nil {
				continue
			}
			err := q.Release(d.id, 0)
			switch {
			case err == nil || unknown(err):
				d.released = true
			case errors.Is(err, queue.ErrLeaseLost):
				require.False(t, clock.Now().Before(d.deadline.Add(skew)), "step %d: lease lost before it ended", step)
				d.released = true
			default:
				require.ErrorIs(t, err, tipkv.ErrConflict, "step %d: release", step)
			}
		case r < 85:
			d := held(h)
			if d == nil {
				continue
			}
			err := q.Extend(d.id, lease)
			switch {
			case err == nil:
				d.deadline = clock.Now().Add(lease)
			case unknown(err), errors.Is(err, queue.ErrLeaseLost):
				// The lease may have been extended: its end is no
				// earlier than it was.
			default:
				require.ErrorIs(t, err, tipkv.ErrConflict, "step %d: extend", step)
			}
		default:
			clock.Advance(time.Duration(rng.IntN(40)) * time.Second)
		}
	}

	// Faults off, every lease over: drain.
	for _, fs := range fss {
		fs.SetOdds(faultstore.Odds{})
	}
	clock.Advance(lease + skew)
	for {
		ms, err := qs[0].Receive(100, lease)
		require.NoError(t, err)
		if len(ms) == 0 {
			break
		}
		deliver(0, ms, false)
		for _, m := range ms {
			require.NoError(t, qs[0].Ack(dbs[0], m.ID))
			gone[m.Value] = "acked"
		}
	}
	lost := 0
	for v, outcome := range enqueued {
		if outcome == "ok" && gone[v] == "" {
			lost++
			t.Errorf("message %d was enqueued and never consumed", v)
		}
	}
	require.Zero(t, lost)
	st, err := qs[1].ReadStats()
	require.NoError(t, err)
	for seq := range seqOf {
		require.Less(t, seq, st.Tail, "a sequence number at or past the tail")
	}
	require.Zero(t, st.Len)
	require.NoError(t, check.Store(raw, check.Options{FormatVersion: tipkv.FormatVersion}).Err())
	t.Logf("%d messages; injected: %d failed conditions, %d unknown applied, %d unknown lost",
		next, fss[0].Conditions.Load()+fss[1].Conditions.Load(), fss[0].Applied.Load()+fss[1].Applied.Load(), fss[0].Lost.Load()+fss[1].Lost.Load())
}

// liveItems reads the messages of queue "q" from the store: their values
// by sequence number.
func liveItems(t *testing.T, s engine.Store) map[int64]int {
	t.Helper()
	prefix := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "q")
	it, err := s.NewIter(prefix, codec.PrefixEnd(prefix))
	require.NoError(t, err)
	defer it.Close()
	out := map[int64]int{}
	for ok := it.First(); ok; ok = it.Next() {
		seq, _, err := codec.DecodeAsc(it.Key()[len(prefix):])
		require.NoError(t, err)
		v, err := it.Value()
		require.NoError(t, err)
		_, _, payload, err := queuefmt.ParseItem(v)
		require.NoError(t, err)
		var n int
		require.NoError(t, codec.Msgpack[int]{}.Decode(payload, &n))
		out[seq] = n
	}
	require.NoError(t, it.Error())
	return out
}
