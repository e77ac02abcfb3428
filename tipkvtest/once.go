package tipkvtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// onceCases returns the tests of writes guarded by idempotency keys
// (EnqueueOnce, AppendOnce, PutOnce): a duplicate returns the first
// result and writes nothing, other content is a distinct error, racing
// writers make one write, and every row of tipkv.Scope's table holds
// against every queue transition.
func onceCases() []testCase {
	return []testCase{
		{"DuplicateReturnsFirst", checked(testOnceDuplicate)},
		{"Mismatch", checked(testOnceMismatch)},
		{"AtomicInUpdate", checked(testOnceAtomic)},
		{"Racing", checked(testOnceRacing)},
		{"QueueScopeTable", checked(testOnceQueueScopes)},
		{"DocumentAndFeedScopes", checked(testOnceVersionedScopes)},
		{"SweepDeletesEndedKeys", checked(testOnceSweep)},
		{"Invalid", checked(testOnceInvalid)},
		{"OnceModel", checked(testOnceModel)},
	}
}

// onceKeys counts the keys of the idempotency families (records and their
// index entries) in db's store.
func onceKeys(t testing.TB, db *tipkv.DB) int {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	it, err := s.NewIter([]byte{byte(codec.FamilyOnce)}, []byte{byte(codec.FamilyOnceSeqs) + 1})
	require.NoError(t, err)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	require.NoError(t, it.Close())
	return n
}

// A second write with a key returns what the first produced and writes
// nothing, on the DB and inside an Update, for queues, feeds and
// documents.
func testOnceDuplicate(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[qJob](t, db, "jobs", nil)
	seq, dup, err := q.EnqueueOnce(db, "k1", tipkv.UntilDone(), qJob{N: 1})
	require.NoError(t, err)
	require.False(t, dup)
	seq2, dup, err := q.EnqueueOnce(db, "k1", tipkv.UntilDone(), qJob{N: 1})
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, seq, seq2)
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		s, dup, err := q.EnqueueOnce(b, "k1", tipkv.UntilDone(), qJob{N: 1})
		require.True(t, dup)
		require.Equal(t, seq, s)
		return err
	}))
	require.Equal(t, 1, q.Len())
	// Another key is another message.
	seq3, dup, err := q.EnqueueOnce(db, "k2", tipkv.UntilDone(), qJob{N: 1})
	require.NoError(t, err)
	require.False(t, dup)
	require.Greater(t, seq3, seq)
	require.Equal(t, 2, q.Len())
	// Keys are per queue.
	other := qOpen[qJob](t, db, "other", nil)
	_, dup, err = other.EnqueueOnce(db, "k1", tipkv.UntilDone(), qJob{N: 1})
	require.NoError(t, err)
	require.False(t, dup)

	feed, err := versioned.NewFeed[string](db, nil)
	require.NoError(t, err)
	pos, dup, err := feed.AppendOnce(db, "s", "e1", tipkv.Window(time.Hour), "hello")
	require.NoError(t, err)
	require.False(t, dup)
	pos2, dup, err := feed.AppendOnce(db, "s", "e1", tipkv.Window(time.Hour), "hello")
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, pos, pos2)
	n := 0
	for _, err := range feed.Newest("s", tipkv.Query{}) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 1, n)

	docs, err := versioned.NewCollection[string](db, "docs", nil)
	require.NoError(t, err)
	v, dup, err := docs.PutOnce(db, "a", "p1", tipkv.UntilForgotten(), "one")
	require.NoError(t, err)
	require.False(t, dup)
	require.Equal(t, int64(1), v)
	_, err = docs.Put(db, "a", "two")
	require.NoError(t, err)
	v2, dup, err := docs.PutOnce(db, "a", "p1", tipkv.UntilForgotten(), "one")
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, int64(1), v2, "the first write's version, not the latest")
	d, err := docs.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(2), d.Version)
}

// The same key with other content, while it holds, is
// ErrIdempotencyMismatch and writes nothing.
func testOnceMismatch(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[qJob](t, db, "jobs", nil)
	_, _, err := q.EnqueueOnce(db, "k", tipkv.UntilDone(), qJob{N: 1})
	require.NoError(t, err)
	_, _, err = q.EnqueueOnce(db, "k", tipkv.UntilDone(), qJob{N: 2})
	require.ErrorIs(t, err, tipkv.ErrIdempotencyMismatch)
	err = db.Update(func(b *tipkv.Batch) error {
		_, _, err := q.EnqueueOnce(b, "k", tipkv.UntilDone(), qJob{N: 2})
		return err
	})
	require.ErrorIs(t, err, tipkv.ErrIdempotencyMismatch)
	// Headers and times are not content.
	_, dup, err := q.EnqueueOnceWith(db, "k", tipkv.UntilDone(), queue.EnqueueOptions{Headers: queue.Headers{"traceparent": "x"}}, qJob{N: 1})
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, 1, q.Len())

	feed, err := versioned.NewFeed[string](db, nil)
	require.NoError(t, err)
	_, _, err = feed.AppendOnce(db, "s", "e", tipkv.UntilForgotten(), "a")
	require.NoError(t, err)
	_, _, err = feed.AppendOnce(db, "s", "e", tipkv.UntilForgotten(), "b")
	require.ErrorIs(t, err, tipkv.ErrIdempotencyMismatch)

	docs, err := versioned.NewCollection[string](db, "docs", nil)
	require.NoError(t, err)
	_, _, err = docs.PutOnce(db, "a", "p", tipkv.UntilForgotten(), "x")
	require.NoError(t, err)
	_, _, err = docs.PutOnce(db, "b", "p", tipkv.UntilForgotten(), "x")
	require.ErrorIs(t, err, tipkv.ErrIdempotencyMismatch, "the same key for another document")
	_, err = docs.Latest("b")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
}

// The key commits with its write: an Update that fails writes neither, so
// the next try writes; a key used twice in one Update writes once; the
// key and a document Put in one Update commit together.
func testOnceAtomic(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[qJob](t, db, "jobs", nil)
	docs, err := versioned.NewCollection[string](db, "docs", nil)
	require.NoError(t, err)
	boom := errors.New("boom")
	err = db.Update(func(b *tipkv.Batch) error {
		if _, err := docs.Put(b, "a", "x"); err != nil {
			return err
		}
		if _, _, err := q.EnqueueOnce(b, "k", tipkv.UntilDone(), qJob{N: 1}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, q.Len())
	require.Zero(t, onceKeys(t, db), "the failed Update left no key")

	var first, second int64
	var dup1, dup2 bool
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		if _, err := docs.Put(b, "a", "x"); err != nil {
			return err
		}
		var err error
		if first, dup1, err = q.EnqueueOnce(b, "k", tipkv.UntilDone(), qJob{N: 1}); err != nil {
			return err
		}
		second, dup2, err = q.EnqueueOnce(b, "k", tipkv.UntilDone(), qJob{N: 1})
		return err
	}))
	require.False(t, dup1)
	require.True(t, dup2)
	require.Equal(t, first, second)
	require.Equal(t, 1, q.Len())
	ms, err := q.Receive(10, time.Minute)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, first, ms[0].ID.Seq())
}

// N goroutines, on one DB and on a second one where the engine is shared,
// write with one key at once: exactly one write is made, and every call
// returns its result.
func testOnceRacing(t *testing.T, b backend) {
	db := b.Open(t, nil)
	dbs := []*tipkv.DB{db}
	if b.Second != nil {
		dbs = append(dbs, b.Second(t, db, nil))
	}
	const perDB = 8
	rounds := b.N(5)
	for r := range rounds {
		key := fmt.Sprint("k", r)
		type result struct {
			seq, pos, ver int64
			firsts        int
		}
		var mu sync.Mutex
		var res []result
		var wg sync.WaitGroup
		for _, d := range dbs {
			q := qOpen[qJob](t, d, "jobs", nil)
			feed, err := versioned.NewFeed[string](d, nil)
			require.NoError(t, err)
			docs, err := versioned.NewCollection[string](d, "docs", nil)
			require.NoError(t, err)
			for g := range perDB {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var out result
					seq, dup, err := q.EnqueueOnce(d, key, tipkv.UntilDone(), qJob{N: r})
					if !assertNoError(t, err) {
						return
					}
					out.seq = seq
					if !dup {
						out.firsts++
					}
					// Half inside an Update, half on the DB.
					if g%2 == 0 {
						err = d.Update(func(b *tipkv.Batch) error {
							var err error
							out.pos, dup, err = feed.AppendOnce(b, "s", key, tipkv.Window(time.Hour), "e")
							return err
						})
					} else {
						out.pos, dup, err = feed.AppendOnce(d, "s", key, tipkv.Window(time.Hour), "e")
					}
					if !assertNoError(t, err) {
						return
					}
					if !dup {
						out.firsts += 10
					}
					ver, dup, err := docs.PutOnce(d, key, key, tipkv.UntilForgotten(), "d")
					if !assertNoError(t, err) {
						return
					}
					out.ver = ver
					if !dup {
						out.firsts += 100
					}
					mu.Lock()
					res = append(res, out)
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		require.Len(t, res, perDB*len(dbs))
		firsts := 0
		for _, x := range res {
			require.Equal(t, res[0].seq, x.seq)
			require.Equal(t, res[0].pos, x.pos)
			require.Equal(t, res[0].ver, x.ver)
			firsts += x.firsts
		}
		require.Equal(t, 111, firsts, "one first write of each kind")
		require.Equal(t, int64(1), res[0].ver)
	}
	q := qOpen[qJob](t, db, "jobs", nil)
	ms, err := q.Pop(100)
	require.NoError(t, err)
	require.Len(t, ms, rounds, "one message per key")
	feed, err := versioned.NewFeed[string](db, nil)
	require.NoError(t, err)
	n := 0
	for _, err := range feed.Newest("s", tipkv.Query{}) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, rounds, n, "one event per key")
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// onceTransition is one thing that happens to a queue message after its
// EnqueueOnce, from tipkv.Scope's table.
type onceTransition struct {
	name string
	// do applies the transition to the message seq of q.
	do func(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], clock *testutil.Clock, seq int64)
	// ends is the set of scopes the transition ends.
	ends map[tipkv.ScopeKind]bool
}

func onceTransitions() []onceTransition {
	receive := func(t *testing.T, q *queue.Queue[qJob], seq int64) queue.ID {
		ms, err := q.Receive(1, time.Minute)
		require.NoError(t, err)
		require.Len(t, ms, 1)
		require.Equal(t, seq, ms[0].ID.Seq())
		return ms[0].ID
	}
	deadLetter := func(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], seq int64) {
		id := receive(t, q, seq)
		require.NoError(t, q.Release(id, 0))
		ms, err := q.Receive(1, time.Minute) // MaxAttempts 1: moved
		require.NoError(t, err)
		require.Empty(t, ms)
		n := 0
		for d, err := range q.DeadLetters() {
			require.NoError(t, err)
			require.Equal(t, seq, d.Seq)
			n++
		}
		require.Equal(t, 1, n)
	}
	done := map[tipkv.ScopeKind]bool{tipkv.ScopeUntilDone: true}
	return []onceTransition{
		{name: "none", do: func(*testing.T, *tipkv.DB, *queue.Queue[qJob], *testutil.Clock, int64) {}},
		{name: "receive", do: func(t *testing.T, _ *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, seq int64) {
			receive(t, q, seq)
		}},
		{name: "release", do: func(t *testing.T, _ *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, seq int64) {
			require.NoError(t, q.Release(receive(t, q, seq), 0))
		}},
		{name: "retry", do: func(t *testing.T, _ *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, seq int64) {
			require.NoError(t, q.Retry(receive(t, q, seq)))
		}},
		{name: "lease expiry", do: func(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], clock *testutil.Clock, seq int64) {
			receive(t, q, seq)
			clock.Advance(time.Minute + qLapse(t, db) + time.Second)
			queue.Wake(db)
			ms, err := q.Peek(1)
			require.NoError(t, err)
			require.Len(t, ms, 1, "visible again")
		}},
		{name: "dead letter", do: func(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, seq int64) {
			deadLetter(t, db, q, seq)
		}},
		{name: "requeue", ends: done, do: func(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, seq int64) {
			deadLetter(t, db, q, seq)
			require.NoError(t, q.Requeue(db, seq))
		}},
		{name: "discard", ends: done, do: func(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, seq int64) {
			deadLetter(t, db, q, seq)
			require.NoError(t, q.Discard(db, seq))
		}},
		{name: "ack", ends: done, do: func(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, seq int64) {
			require.NoError(t, q.Ack(db, receive(t, q, seq)))
		}},
		{name: "pop", ends: done, do: func(t *testing.T, _ *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, seq int64) {
			ms, err := q.Pop(1)
			require.NoError(t, err)
			require.Len(t, ms, 1)
		}},
		{name: "window passes", ends: map[tipkv.ScopeKind]bool{tipkv.ScopeWindow: true}, do: func(_ *testing.T, _ *tipkv.DB, _ *queue.Queue[qJob], clock *testutil.Clock, _ int64) {
			clock.Advance(onceWindow)
		}},
		{name: "sweep", do: func(t *testing.T, db *tipkv.DB, _ *queue.Queue[qJob], _ *testutil.Clock, _ int64) {
			_, err := db.SweepKeys(context.Background())
			require.NoError(t, err)
		}},
		{name: "ack and sweep", ends: done, do: func(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, seq int64) {
			require.NoError(t, q.Ack(db, receive(t, q, seq)))
			_, err := db.SweepKeys(context.Background())
			require.NoError(t, err)
		}},
		{name: "window passes and sweep", ends: map[tipkv.ScopeKind]bool{tipkv.ScopeWindow: true}, do: func(t *testing.T, db *tipkv.DB, _ *queue.Queue[qJob], clock *testutil.Clock, _ int64) {
			clock.Advance(onceWindow)
			_, err := db.SweepKeys(context.Background())
			require.NoError(t, err)
		}},
		{name: "forget", ends: map[tipkv.ScopeKind]bool{tipkv.ScopeWindow: true, tipkv.ScopeUntilDone: true, tipkv.ScopeUntilForgotten: true},
			do: func(t *testing.T, db *tipkv.DB, q *queue.Queue[qJob], _ *testutil.Clock, _ int64) {
				held, err := q.ForgetKey(db, "key")
				require.NoError(t, err)
				require.True(t, held)
			}},
	}
}

const onceWindow = time.Hour

// Every row of tipkv.Scope's table against every queue transition: after
// the transition, a second EnqueueOnce with the key returns the first
// sequence number (the key holds) or enqueues anew (it ended).
func testOnceQueueScopes(t *testing.T, b backend) {
	scopes := []tipkv.Scope{tipkv.Window(onceWindow), tipkv.UntilDone(), tipkv.UntilForgotten()}
	for _, tr := range onceTransitions() {
		for _, sc := range scopes {
			t.Run(fmt.Sprintf("%s/%s", tr.name, sc), func(t *testing.T) {
				db, clock := qOpenClocked(t, b)
				q := qOpen(t, db, "jobs", &queue.Options[qJob]{MaxAttempts: 1, Backoff: func(int) time.Duration { return 0 }})
				seq, dup, err := q.EnqueueOnce(db, "key", sc, qJob{N: 1})
				require.NoError(t, err)
				require.False(t, dup)
				tr.do(t, db, q, clock, seq)
				again, dup, err := q.EnqueueOnce(db, "key", sc, qJob{N: 1})
				require.NoError(t, err)
				if tr.ends[sc.Kind()] {
					require.False(t, dup, "the key ended")
					require.Greater(t, again, seq)
				} else {
					require.True(t, dup, "the key holds")
					require.Equal(t, seq, again)
				}
				// A sweep never ends a key that holds.
				_, err = db.SweepKeys(context.Background())
				require.NoError(t, err)
				third, dup, err := q.EnqueueOnce(db, "key", sc, qJob{N: 1})
				require.NoError(t, err)
				require.True(t, dup)
				require.Equal(t, again, third)
				Healthy(t, db)
			})
		}
	}
}

// Feeds and documents: a window ends when it passes, Forget ends any key,
// and the data's own life (Trim, Delete, Purge) does not end a key.
func testOnceVersionedScopes(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	feed, err := versioned.NewFeed[string](db, nil)
	require.NoError(t, err)
	docs, err := versioned.NewCollection[string](db, "docs", nil)
	require.NoError(t, err)

	pos, _, err := feed.AppendOnce(db, "s", "w", tipkv.Window(onceWindow), "e")
	require.NoError(t, err)
	posF, _, err := feed.AppendOnce(db, "s", "f", tipkv.UntilForgotten(), "e")
	require.NoError(t, err)
	v, _, err := docs.PutOnce(db, "a", "w", tipkv.Window(onceWindow), "x")
	require.NoError(t, err)
	_, _, err = docs.PutOnce(db, "b", "f", tipkv.UntilForgotten(), "x")
	require.NoError(t, err)

	// The data goes; the keys hold.
	require.NoError(t, feed.Trim(db, "s", 0))
	_, err = docs.Purge(db, "a")
	require.NoError(t, err)
	p2, dup, err := feed.AppendOnce(db, "s", "w", tipkv.Window(onceWindow), "e")
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, pos, p2)
	v2, dup, err := docs.PutOnce(db, "a", "w", tipkv.Window(onceWindow), "x")
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, v, v2)

	// Just before the window ends it holds; at its end it does not.
	clock.Advance(onceWindow - time.Nanosecond)
	_, dup, err = feed.AppendOnce(db, "s", "w", tipkv.Window(onceWindow), "e")
	require.NoError(t, err)
	require.True(t, dup)
	clock.Advance(time.Nanosecond)
	_, dup, err = feed.AppendOnce(db, "s", "w", tipkv.Window(onceWindow), "e")
	require.NoError(t, err)
	require.False(t, dup, "the window ended")
	_, dup, err = docs.PutOnce(db, "a", "w", tipkv.Window(onceWindow), "other content now allowed")
	require.NoError(t, err)
	require.False(t, dup)

	// Until forgotten: a day later it holds; ForgetKey ends it.
	clock.Advance(24 * time.Hour)
	p3, dup, err := feed.AppendOnce(db, "s", "f", tipkv.UntilForgotten(), "e")
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, posF, p3)
	held, err := feed.ForgetKey(db, "s", "f")
	require.NoError(t, err)
	require.True(t, held)
	held, err = feed.ForgetKey(db, "s", "f")
	require.NoError(t, err)
	require.False(t, held)
	_, dup, err = feed.AppendOnce(db, "s", "f", tipkv.UntilForgotten(), "e")
	require.NoError(t, err)
	require.False(t, dup)
	held, err = docs.ForgetKey(db, "f")
	require.NoError(t, err)
	require.True(t, held)
	v3, dup, err := docs.PutOnce(db, "b", "f", tipkv.UntilForgotten(), "x")
	require.NoError(t, err)
	require.False(t, dup)
	require.Equal(t, int64(2), v3)
}

// The sweep deletes the keys that ended (windows that passed, until-done
// keys of consumed messages) with their index entries, and keeps the rest:
// a dead letter's key, a window still open, an until-forgotten key.
func testOnceSweep(t *testing.T, b backend) {
	db, clock := qOpenClocked(t, b)
	q := qOpen(t, db, "jobs", &queue.Options[qJob]{MaxAttempts: 1, Backoff: func(int) time.Duration { return 0 }})
	feed, err := versioned.NewFeed[string](db, nil)
	require.NoError(t, err)
	n := b.N(120)
	for i := range n {
		_, _, err := q.EnqueueOnce(db, fmt.Sprint("d", i), tipkv.UntilDone(), qJob{N: i})
		require.NoError(t, err)
		_, _, err = feed.AppendOnce(db, "s", fmt.Sprint("w", i), tipkv.Window(time.Minute), "e")
		require.NoError(t, err)
	}
	_, _, err = feed.AppendOnce(db, "s", "long", tipkv.Window(onceWindow), "e")
	require.NoError(t, err)
	_, _, err = feed.AppendOnce(db, "s", "forever", tipkv.UntilForgotten(), "e")
	require.NoError(t, err)
	require.Equal(t, 2*(2*n+1)+1, onceKeys(t, db), "a record and an index entry per key, none for until-forgotten")

	// Nothing ended yet.
	st, err := db.SweepKeys(context.Background())
	require.NoError(t, err)
	require.Zero(t, st.Windowed+st.Done)

	// The first message becomes a dead letter; the others are consumed.
	ms, err := q.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, q.Release(ms[0].ID, 0))
	for {
		ms, err := q.Receive(b.N(50), time.Minute)
		require.NoError(t, err)
		if len(ms) == 0 {
			break
		}
		ids := make([]queue.ID, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		require.NoError(t, q.Ack(db, ids...))
	}
	clock.Advance(time.Minute)
	st, err = db.SweepKeys(context.Background())
	require.NoError(t, err)
	require.Equal(t, n, st.Windowed)
	require.Equal(t, n-1, st.Done)
	require.Equal(t, 2+1+2, onceKeys(t, db), "the dead letter's and the open window's record and entry, and the until-forgotten record")

	// A second pass finds nothing; the dead letter's key still holds.
	st, err = db.SweepKeys(context.Background())
	require.NoError(t, err)
	require.Zero(t, st.Windowed+st.Done)
	_, dup, err := q.EnqueueOnce(db, "d0", tipkv.UntilDone(), qJob{N: 0})
	require.NoError(t, err)
	require.True(t, dup)
	Healthy(t, db)
}

// Bad keys and scopes are ErrInvalid and write nothing.
func testOnceInvalid(t *testing.T, b backend) {
	db := b.Open(t, nil)
	q := qOpen[qJob](t, db, "jobs", nil)
	feed, err := versioned.NewFeed[string](db, nil)
	require.NoError(t, err)
	docs, err := versioned.NewCollection[string](db, "docs", nil)
	require.NoError(t, err)
	for _, c := range []struct {
		key   string
		scope tipkv.Scope
	}{
		{"", tipkv.UntilDone()},
		{string(make([]byte, 1025)), tipkv.UntilDone()},
		{"k", tipkv.Scope{}},
		{"k", tipkv.Window(0)},
		{"k", tipkv.Window(-time.Second)},
	} {
		_, _, err := q.EnqueueOnce(db, c.key, c.scope, qJob{})
		require.ErrorIs(t, err, tipkv.ErrInvalid)
		_, _, err = feed.AppendOnce(db, "s", c.key, c.scope, "e")
		require.ErrorIs(t, err, tipkv.ErrInvalid)
		_, _, err = docs.PutOnce(db, "a", c.key, c.scope, "x")
		require.ErrorIs(t, err, tipkv.ErrInvalid)
	}
	_, _, err = feed.AppendOnce(db, "s", "k", tipkv.UntilDone(), "e")
	require.ErrorIs(t, err, tipkv.ErrInvalid, "UntilDone is a queue's scope")
	_, _, err = docs.PutOnce(db, "a", "k", tipkv.UntilDone(), "x")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	require.Zero(t, q.Len())
	require.Zero(t, onceKeys(t, db))
}
