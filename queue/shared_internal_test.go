package queue

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
)

// seekStore counts the seeks of its iterators, by target.
type seekStore struct {
	engine.Store
	seeks map[string]int
}

func (s *seekStore) NewIter(lo, hi []byte) (engine.Iter, error) {
	it, err := s.Store.NewIter(lo, hi)
	return &seekIter{Iter: it, s: s}, err
}

type seekIter struct {
	engine.Iter
	s *seekStore
}

func (it *seekIter) SeekGE(k []byte) bool {
	it.s.seeks[string(k)]++
	return it.Iter.SeekGE(k)
}

func openShared(t *testing.T, n int) []*tipkv.DB {
	return testutil.OpenShared(t, n, sharedstore.Options{}, nil)
}

func popAll(t *testing.T, q *Queue[int], n int) {
	t.Helper()
	for n > 0 {
		ms, err := q.Pop(min(n, 100))
		require.NoError(t, err)
		require.NotEmpty(t, ms)
		n -= len(ms)
	}
}

func enqueueN(t *testing.T, db *tipkv.DB, q *Queue[int], n int) {
	t.Helper()
	vals := make([]int, 100)
	for n > 0 {
		k := min(n, 100)
		_, err := q.Enqueue(db, vals[:k]...)
		require.NoError(t, err)
		n -= k
	}
}

// A message that stays leased holds the head; the messages consumed after
// it are walked by the first scan that passes them, and seeked over by the
// scans after it.
func TestSharedScanSeeksOverConsumedRuns(t *testing.T) {
	dbs := openShared(t, 2)
	a, err := Open[int](dbs[0], "q", nil)
	require.NoError(t, err)
	b, err := Open[int](dbs[1], "q", nil)
	require.NoError(t, err)
	enqueueN(t, dbs[0], a, 501)
	stuck, err := b.Receive(1, time.Hour)
	require.NoError(t, err)
	require.Equal(t, int64(1), stuck[0].Seq)
	popAll(t, a, 500) // 2 to 501
	enqueueN(t, dbs[0], a, 10)

	counter := &seekStore{Store: b.c.store, seeks: map[string]int{}}
	b.c.store = counter
	ms, err := b.Receive(5, time.Hour)
	require.NoError(t, err)
	require.Equal(t, int64(502), ms[0].Seq)
	require.Equal(t, []span{{2, 502}}, b.c.sm.gaps, "the consumed run is remembered")
	ms, err = b.Receive(5, time.Hour)
	require.NoError(t, err)
	require.Equal(t, int64(507), ms[0].Seq)
	require.Equal(t, 1, counter.seeks[string(b.c.k.item(nil, 502))], "the second scan seeks over it")

	require.NoError(t, b.Ack(dbs[1], stuck[0].ID))
	ms, err = b.Receive(5, time.Hour)
	require.NoError(t, err)
	require.Empty(t, ms)
	require.Equal(t, int64(502), b.c.sm.head, "the head moves past the run")
	require.Empty(t, b.c.sm.gaps, "and forgets it")
}

// A consumer that never enqueues writes the head it has reached to the
// state key, once it is headLag past the stored one; an enqueue writes the
// highest it knows.
func TestSharedHeadAdvance(t *testing.T) {
	dbs := openShared(t, 2)
	producer, err := Open[int](dbs[0], "q", nil)
	require.NoError(t, err)
	consumer, err := Open[int](dbs[1], "q", nil)
	require.NoError(t, err)
	n := headLag + 200
	enqueueN(t, dbs[0], producer, n)
	stored := func() state {
		v, err := producer.c.store.Get(producer.c.k.state)
		require.NoError(t, err)
		st, err := parseState(v)
		require.NoError(t, err)
		return st
	}
	require.Equal(t, state{head: 1, tail: int64(n + 1)}, stored())
	popAll(t, consumer, n)
	st := stored()
	require.Greater(t, st.head, int64(headLag), "the consumer wrote its head")
	require.Equal(t, int64(n+1), st.tail)
	ms, err := consumer.Pop(1) // finds nothing, from the head it knows
	require.NoError(t, err)
	require.Empty(t, ms)
	_, err = consumer.Enqueue(dbs[1], 7)
	require.NoError(t, err)
	require.Equal(t, state{head: int64(n + 1), tail: int64(n + 2)}, stored(), "an enqueue writes the highest head its process knows")
}

// An engine's batch limits bound what one Receive or Pop takes, and the
// largest value an enqueue takes (a delivery writes and requires it).
func TestSharedBatchLimits(t *testing.T) {
	dbs := testutil.OpenShared(t, 1, sharedstore.Options{MaxBatchOps: 16, MaxBatchBytes: 64 << 10}, nil)
	db := dbs[0]
	q, err := Open(db, "q", &Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	for range 10 {
		_, err := q.Enqueue(db, []byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e"))
		require.NoError(t, err)
	}
	ms, err := q.Receive(100, time.Minute)
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	require.Less(t, len(ms), 16, "what a batch holds")
	ids := make([]ID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	require.NoError(t, q.Ack(db, ids...))
	ms, err = q.Pop(100)
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	require.Less(t, len(ms), 16)

	big := bytes.Repeat([]byte{'x'}, 33<<10)
	_, err = q.Enqueue(db, big)
	require.ErrorIs(t, err, tipkv.ErrInvalid, "a value a delivery could not write")
	_, err = q.Enqueue(db, big[:30<<10])
	require.NoError(t, err)
	popAll2 := func() int {
		n := 0
		for {
			ms, err := q.Pop(100)
			require.NoError(t, err)
			if len(ms) == 0 {
				return n
			}
			n += len(ms)
		}
	}
	require.Equal(t, 50-len(ids)-len(ms)+1, popAll2(), "every message, the large one too")
}

// getStore counts the point reads of one key.
type getStore struct {
	engine.Store
	key  []byte
	gets int
}

func (s *getStore) Get(k []byte) ([]byte, error) {
	if bytes.Equal(k, s.key) {
		s.gets++
	}
	return s.Store.Get(k)
}

// A process that enqueues again requires the state key it wrote last
// instead of reading it: a lone producer reads it once.
func TestSharedEnqueueTakesTheTailHint(t *testing.T) {
	dbs := openShared(t, 1)
	q, err := Open[int](dbs[0], "q", nil)
	require.NoError(t, err)
	counter := &getStore{Store: q.c.store, key: q.c.k.state}
	q.c.store = counter
	for i := range 50 {
		first, err := q.Enqueue(dbs[0], i, i)
		require.NoError(t, err)
		require.Equal(t, int64(2*i+1), first)
	}
	require.LessOrEqual(t, counter.gets, 1, "the state key is read once, then hinted")
}

// Two processes that take turns make each other's hints stale: every
// number is still taken once, and each producer soon reads first (the skip
// doubles with each miss in a row) instead of failing a commit per enqueue.
func TestSharedTailHintStaleAcrossProcesses(t *testing.T) {
	dbs := openShared(t, 2)
	a, err := Open[int](dbs[0], "q", nil)
	require.NoError(t, err)
	b, err := Open[int](dbs[1], "q", nil)
	require.NoError(t, err)
	seen := map[int64]bool{}
	const rounds = 300
	for i := range rounds {
		for j, q := range []*Queue[int]{a, b} {
			first, err := q.Enqueue(dbs[j], i)
			require.NoError(t, err)
			require.False(t, seen[first], "number %d taken twice", first)
			seen[first] = true
		}
	}
	for n := int64(1); n <= 2*rounds; n++ {
		require.True(t, seen[n], "number %d never taken", n)
	}
	for _, q := range []*Queue[int]{a, b} {
		q.c.mu.Lock()
		after, misses := q.c.sm.hint.after, q.c.sm.hint.misses
		q.c.mu.Unlock()
		require.Equal(t, maxHintSkip, after, "misses in a row double the reads before the next hint")
		require.LessOrEqual(t, misses, 10, "each miss makes twice as many enqueues read first")
	}
	ms, err := a.Pop(2 * rounds)
	require.NoError(t, err)
	require.Len(t, ms, 2*rounds)
}

// stepStore counts the items its iterators stop on.
type stepStore struct {
	engine.Store
	steps int
}

func (s *stepStore) NewIter(lo, hi []byte) (engine.Iter, error) {
	it, err := s.Store.NewIter(lo, hi)
	return &stepIter{Iter: it, s: s}, err
}

type stepIter struct {
	engine.Iter
	s *stepStore
}

func (it *stepIter) count(ok bool) bool {
	if ok {
		it.s.steps++
	}
	return ok
}

func (it *stepIter) First() bool          { return it.count(it.Iter.First()) }
func (it *stepIter) Next() bool           { return it.count(it.Iter.Next()) }
func (it *stepIter) SeekGE(k []byte) bool { return it.count(it.Iter.SeekGE(k)) }

// A Receive on a shared engine reads a backlog behind its group's window
// once: the next pass over it as a run while the window stays full, and
// deliver the group's next once it opens.
func TestSharedGroupRunsPassedOver(t *testing.T) {
	dbs := openShared(t, 1)
	db := dbs[0]
	q, err := Open[int](db, "q", nil)
	require.NoError(t, err)
	counter := &stepStore{Store: q.c.store}
	q.c.store = counter
	const backlog = 2000
	vals := make([]int, 100)
	for i := 0; i < backlog; i += len(vals) {
		for j := range vals {
			vals[j] = i + j
		}
		_, err := q.EnqueueWith(db, EnqueueOptions{Group: "busy"}, vals...)
		require.NoError(t, err)
	}
	receive := func(want ...int) []Message[int] {
		t.Helper()
		ms, err := q.Receive(10, time.Minute)
		require.NoError(t, err)
		var got []int
		for _, m := range ms {
			got = append(got, m.Value)
		}
		require.Equal(t, want, got)
		return ms
	}
	counter.steps = 0
	first := receive(0)
	require.Greater(t, counter.steps, backlog-10, "the first read past the backlog")
	_, err = q.EnqueueWith(db, EnqueueOptions{Group: "quiet"}, -1)
	require.NoError(t, err)
	quiet := receive(-1)
	require.NoError(t, q.Ack(db, quiet[0].ID))
	for round := range 5 {
		_, err = q.EnqueueWith(db, EnqueueOptions{Group: "quiet"}, -2-round)
		require.NoError(t, err)
		counter.steps = 0
		quiet = receive(-2 - round)
		require.Less(t, counter.steps, 20, "round %d: the backlog read again", round)
		require.NoError(t, q.Ack(db, quiet[0].ID))
	}
	// The window opens: the group's next, and not the one after.
	require.NoError(t, q.Ack(db, first[0].ID))
	second := receive(1)
	receive()
	require.NoError(t, q.Ack(db, second[0].ID))
	receive(2)
}
