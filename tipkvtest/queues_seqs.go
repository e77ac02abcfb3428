package tipkvtest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// The sequence numbers Enqueue, EnqueueAt and EnqueueWith return: a
// call's items get first, first+1, ..., in order, and a consumer receives
// each item at its number.

// qSpans collects what enqueue calls returned: the value enqueued at each
// sequence number.
type qSpans[T any] map[int64]T

// add records that a call returned first for vals, failing the test if
// a number was returned before.
func (s qSpans[T]) add(t testing.TB, first int64, vals ...T) {
	t.Helper()
	require.Positive(t, first, "the first sequence number of %d items", len(vals))
	for i, v := range vals {
		seq := first + int64(i)
		_, dup := s[seq]
		require.False(t, dup, "sequence number %d returned twice", seq)
		s[seq] = v
	}
}

// requireReceived fails unless ms, received oldest first, are exactly
// the recorded items: each at the number its call returned, in order.
func (s qSpans[T]) requireReceived(t testing.TB, ms []queue.Message[T]) {
	t.Helper()
	want := slices.Sorted(maps.Keys(s))
	got := make([]int64, len(ms))
	for i, m := range ms {
		got[i] = m.Seq
	}
	require.Equal(t, want, got, "the numbers received are the numbers returned, in order")
	for _, m := range ms {
		require.Equal(t, s[m.Seq], m.Value, "the item received at %d", m.Seq)
	}
}

// Enqueue, EnqueueAt and EnqueueWith, on a DB and in an Update, return
// the first sequence number of their items; the items are received at
// first, first+1, ..., in order. Calls in one Update get consecutive
// ranges, in call order. No items: 0 and no error. An error: 0. An Update
// that fails leaves its numbers to no message: an exclusive engine skips
// them (after a restart too), a shared one gives them to the next
// enqueue.
func testQueueEnqueueSeqs(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	shared := qShared(t, db)
	q := qOpen[string](t, db, "q", nil)
	spans := qSpans[string]{}

	first := qPush(t, db, q, "a", "b", "c")
	require.Equal(t, int64(1), first, "a new queue numbers from 1")
	spans.add(t, first, "a", "b", "c")
	first = qPush(t, db, q, "d")
	require.Equal(t, int64(4), first, "after a, b and c")
	spans.add(t, first, "d")

	first, err := q.Enqueue(db)
	require.NoError(t, err)
	require.Zero(t, first, "no items")
	first, err = q.EnqueueWith(db, queue.EnqueueOptions{Headers: queue.Headers{"k": "v"}})
	require.NoError(t, err)
	require.Zero(t, first, "no items")

	first, err = q.EnqueueAt(db, clock.Now().Add(time.Minute), "e", "f") // delayed
	require.NoError(t, err)
	require.Equal(t, int64(5), first)
	spans.add(t, first, "e", "f")
	first, err = q.EnqueueWith(db, queue.EnqueueOptions{Headers: queue.Headers{"k": "v"}}, "g")
	require.NoError(t, err)
	require.Equal(t, int64(7), first)
	spans.add(t, first, "g")
	first, err = q.EnqueueWith(tipkv.WithMetadata(db, tipkv.Metadata{Author: "ada"}), queue.EnqueueOptions{At: clock.Now().Add(time.Second)}, "h", "i")
	require.NoError(t, err)
	require.Equal(t, int64(8), first)
	spans.add(t, first, "h", "i")

	// Three calls in one Update: consecutive ranges, in call order. (On a
	// shared engine the function may run again; the last run's numbers
	// are the committed ones.)
	var in [3]int64
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		var err error
		if in[0], err = q.Enqueue(b, "j", "k"); err != nil {
			return err
		}
		if in[1], err = q.EnqueueWith(b, queue.EnqueueOptions{Headers: queue.Headers{"in": "update"}}, "l"); err != nil {
			return err
		}
		in[2], err = q.EnqueueAt(b, time.Time{}, "m", "n", "o")
		return err
	}))
	require.Equal(t, [3]int64{10, 12, 13}, in, "consecutive ranges after h and i")
	spans.add(t, in[0], "j", "k")
	spans.add(t, in[1], "l")
	spans.add(t, in[2], "m", "n", "o")

	// Errors return 0, and take no number.
	first, err = q.Enqueue(db, "ok", strings.Repeat("x", queue.MaxValueSize+1))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Zero(t, first, "an error returns 0")
	first, err = q.EnqueueAt(db, time.Unix(-1, 0), "x")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Zero(t, first, "an error returns 0")
	first, err = q.EnqueueWith(db, queue.EnqueueOptions{Headers: queue.Headers{"k": strings.Repeat("x", queue.MaxHeadersSize)}}, "x")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Zero(t, first, "an error returns 0")
	var inFailed int64
	err = db.Update(func(b *tipkv.Batch) error {
		var err error
		inFailed, err = q.EnqueueAt(b, time.Unix(-1, 0), "x")
		return err
	})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Zero(t, inFailed, "an error in an Update returns 0")

	// An Update that fails after its Enqueue returned: no message has
	// those numbers.
	boom := errors.New("boom")
	var lost int64
	err = db.Update(func(b *tipkv.Batch) error {
		var err error
		if lost, err = q.Enqueue(b, "never", "never"); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, int64(16), lost, "the numbers after o, though the Update failed")
	first = qPush(t, db, q, "p")
	if shared {
		require.Equal(t, lost, first, "a shared engine numbers at commit: the next enqueue takes them")
	} else {
		require.Equal(t, lost+2, first, "an exclusive engine skips them")
	}
	spans.add(t, first, "p")

	// And after a restart: an exclusive engine stored its tail at Close.
	if b.Reopen != nil {
		err = db.Update(func(b *tipkv.Batch) error {
			var err error
			if lost, err = q.Enqueue(b, "never"); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.Equal(t, first+1, lost)
		db = b.Reopen(t, db, &tipkv.Options{Clock: clock.Now})
		q = qOpen[string](t, db, "q", nil)
		first = qPush(t, db, q, "q")
		if shared {
			require.Equal(t, lost, first, "a shared engine numbers at commit: the next enqueue takes it")
		} else {
			require.Equal(t, lost+1, first, "an exclusive engine skips it, after a restart too")
		}
		spans.add(t, first, "q")
	}

	clock.Advance(time.Minute) // e and f, h and i become visible
	spans.requireReceived(t, qDrain(t, db, q))
	st, err := q.ReadStats()
	require.NoError(t, err)
	require.Equal(t, first+1, st.Tail, "the tail is past the last number returned")
	Healthy(t, db)
}

// Goroutines on two handles (two processes on a shared engine; two Queue
// handles of one DB on an exclusive one) enqueue at once, alone and with
// several calls in one Update, with Enqueue, EnqueueAt and EnqueueWith:
// the ranges the calls return are disjoint, the calls of one Update get
// ranges in call order (consecutive on a shared engine, which numbers at
// commit; on an exclusive one, which numbers at the call, another
// writer's enqueue may come between them), and their union is exactly the
// sequence numbers received, each with the item enqueued at it (nothing
// failed, so no number is skipped: they are 1 to the number of items).
func testQueueEnqueueSeqsConcurrent(t *testing.T, b backend) {
	// Updates of four writers collide on a shared engine: give them room
	// to run again rather than fail with ErrConflict.
	opts := &tipkv.Options{MaxRetries: 100}
	dbs := []*tipkv.DB{b.Open(t, opts)}
	if b.Second != nil {
		dbs = append(dbs, b.Second(t, dbs[0], opts))
	} else {
		dbs = append(dbs, dbs[0])
	}
	shared := qShared(t, dbs[0])
	writers, rounds := 4, b.N(30)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)

	type span struct {
		first int64
		jobs  []qJob
	}
	got := make([][]span, writers)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		db := dbs[w%len(dbs)]
		q := qOpen[qJob](t, db, "seqs", nil)
		spawn(&wg, func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			n := 0
			jobs := func() []qJob {
				js := make([]qJob, 1+rng.IntN(4))
				for i := range js {
					js[i] = qJob{Producer: w, N: n}
					n++
				}
				return js
			}
			var spans []span
			defer func() { got[w] = spans }()
			for r := range rounds {
				switch r % 4 {
				case 0:
					js := jobs()
					first, err := q.Enqueue(db, js...)
					if err != nil {
						errs <- fmt.Errorf("writer %d: enqueue: %w", w, err)
						return
					}
					spans = append(spans, span{first, js})
				case 1:
					js := jobs()
					first, err := q.EnqueueWith(db, queue.EnqueueOptions{Headers: queue.Headers{"w": fmt.Sprint(w)}}, js...)
					if err != nil {
						errs <- fmt.Errorf("writer %d: enqueue with: %w", w, err)
						return
					}
					spans = append(spans, span{first, js})
				default:
					a, c := jobs(), jobs()
					var fa, fc int64
					err := db.Update(func(b *tipkv.Batch) error {
						var err error
						if fa, err = q.Enqueue(b, a...); err != nil {
							return err
						}
						fc, err = q.EnqueueAt(b, time.Time{}, c...)
						return err
					})
					if err != nil {
						errs <- fmt.Errorf("writer %d: update: %w", w, err)
						return
					}
					// Consecutive on a shared engine (numbered at
					// commit); on an exclusive one another writer's
					// enqueue may take numbers between the calls.
					if fc < fa+int64(len(a)) || shared && fc != fa+int64(len(a)) {
						errs <- fmt.Errorf("writer %d: two enqueues in one Update returned %d (%d items) and %d", w, fa, len(a), fc)
						return
					}
					spans = append(spans, span{fa, a}, span{fc, c})
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	var all []span
	for _, s := range got {
		all = append(all, s...)
	}
	slices.SortFunc(all, func(a, b span) int { return int(a.first - b.first) })
	want := qSpans[qJob]{}
	next := int64(1)
	for _, s := range all {
		require.Equal(t, next, s.first, "the ranges are disjoint and leave no gap")
		want.add(t, s.first, s.jobs...)
		next += int64(len(s.jobs))
	}
	q := qOpen[qJob](t, dbs[0], "seqs", nil)
	want.requireReceived(t, qDrain(t, dbs[0], q))
	Healthy(t, dbs[0])
}
