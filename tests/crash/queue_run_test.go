package crash_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/check"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/queuefmt"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

// Consumes on Pebble write the queue-state key only every
// knobs.Queue.StateEvery numbers (a run), so a crash loses the head moves
// and count changes since the last one; Open finds them again. Two
// workers enqueue (some Updates aborted, leaving gaps), Pop, Receive and
// Ack (in order, out of order, in part), Release (so that messages come
// back and, after three deliveries, move to the dead-letter queue),
// Requeue and Discard dead letters, and cap the queue, with StateEvery
// small so that runs start and end all the time; the store is cloned as a
// crash would leave it at a random moment while they run. Reopened, every
// message is where a model says it may be: a message whose consume
// (Pop, Ack, Discard) returned is gone, never delivered again; one whose
// enqueue returned and that nothing consumed is there, once (as a message
// or a dead letter); only the operations in flight at the crash may have
// gone either way. Len and the dead letters count exactly what the store
// holds, internal/check agrees with the stored state, and the queue goes
// on delivering every message left exactly once.
func TestCrashQueueRunModel(t *testing.T) {
	for _, seed := range testutil.CrashSeeds(t, 12) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/crash -run 'TestCrashQueueRunModel' -crash.seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, seed^0x30))
			every := 1 + rng.IntN(40)
			defer knobs.Set(&knobs.Queue.StateEvery, every)()
			fs := vfs.NewCrashableMem()
			db, err := openFS("db", fs, &tipkv.Options{MemTableSize: 256 << 10})
			require.NoError(t, err)
			opts := &queue.Options[int]{MaxAttempts: 3, Backoff: func(int) time.Duration { return 0 }}
			q, err := queue.Open(db, "q", opts)
			require.NoError(t, err)

			m := newRunModel()
			steps := 300 + rng.IntN(900)
			crashAt := rng.IntN(steps)
			var (
				wg      sync.WaitGroup
				crashed *vfs.MemFS
				snap    runSnapshot
				once    sync.Once
			)
			crash := func() {
				once.Do(func() {
					m.mu.Lock()
					defer m.mu.Unlock()
					crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(seed, 7))})
					snap = m.snapshot()
				})
			}
			for w := range 2 {
				wg.Add(1)
				wrng := rand.New(rand.NewPCG(seed, uint64(w)))
				go func() {
					defer wg.Done()
					runWorker(t, wrng, db, q, m, steps/2, w, func(step int) {
						if step == crashAt/2 && w == crashAt%2 {
							go crash() // while this worker and the other go on
						}
					})
				}()
			}
			wg.Wait()
			crash()
			require.NoError(t, db.Close())
			require.False(t, t.Failed())

			db, err = openFS("db", crashed, nil)
			require.NoError(t, err)
			defer db.Close()
			s, err := link.StoreOf(db)
			require.NoError(t, err)
			require.NoError(t, check.Store(s, check.Options{}).Err(), "every=%d", every)
			q, err = queue.Open(db, "q", opts)
			require.NoError(t, err)
			items, err := q.Peek(1 << 30)
			require.NoError(t, err)
			var dead []int
			var deadSeqs []int64
			for d, err := range q.DeadLetters() {
				require.NoError(t, err)
				dead = append(dead, d.Value)
				deadSeqs = append(deadSeqs, d.Seq)
			}
			st := q.Stats()
			require.Equal(t, len(items), st.Len, "Len after the crash (every=%d)", every)
			require.Equal(t, len(dead), st.DeadLetters)
			present := map[int]int{}
			for _, it := range items {
				present[it.Value]++
			}
			for _, v := range dead {
				present[v]++
			}
			if !snap.verify(t, present) {
				dumpQueue(t, s)
				for v := range snap.live {
					if present[v] == 0 {
						t.Logf("%d: %v", v, m.log[v])
					}
				}
			}

			// The queue goes on: everything left comes out once.
			require.NoError(t, q.Requeue(db, deadSeqs...))
			seen := map[int]bool{}
			for {
				ms, err := q.Pop(1 + rng.IntN(50))
				require.NoError(t, err)
				if len(ms) == 0 {
					break
				}
				for _, m := range ms {
					require.False(t, seen[m.Value], "message %d delivered twice after the crash", m.Value)
					seen[m.Value] = true
				}
			}
			require.Equal(t, len(present), len(seen))
			require.Equal(t, 0, q.Len())
		})
	}
}

// runModel is what the workers know of every message, by value (values
// are unique): enqueued and committed, consumed, and which operations are
// in flight.
type runModel struct {
	mu       sync.Mutex
	next     int
	live     map[int]bool // committed, not consumed (a message or a dead letter)
	consumed map[int]bool
	inflight map[int]runOp    // by worker
	log      map[int][]string // what happened to each value, for a failure's log
}

func (m *runModel) note(what string, vs []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range vs {
		m.log[v] = append(m.log[v], what)
	}
}

// runOp is an operation in flight: the values it may add or remove, or
// for a Pop, how many of the live values it may remove.
type runOp struct {
	adds, removes []int
	pops          int
}

func newRunModel() *runModel {
	return &runModel{live: map[int]bool{}, consumed: map[int]bool{}, inflight: map[int]runOp{}, log: map[int][]string{}}
}

func (m *runModel) begin(w int, op runOp) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inflight[w] = op
}

// end records what worker w's operation did once it returned.
func (m *runModel) end(w int, added, removed []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.inflight, w)
	for _, v := range added {
		// The other worker may have consumed it already: it saw the
		// message once the enqueue committed, before this call.
		if !m.consumed[v] {
			m.live[v] = true
		}
	}
	for _, v := range removed {
		delete(m.live, v)
		m.consumed[v] = true
	}
}

func (m *runModel) values(n int) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := make([]int, n)
	for i := range vs {
		vs[i] = m.next
		m.next++
	}
	return vs
}

type runSnapshot struct {
	live, consumed map[int]bool
	maybe          map[int]bool // added or removed by an operation in flight
	pops           int          // live values that Pops in flight may have taken
}

func (m *runModel) snapshot() runSnapshot {
	s := runSnapshot{live: map[int]bool{}, consumed: map[int]bool{}, maybe: map[int]bool{}}
	for v := range m.live {
		s.live[v] = true
	}
	for v := range m.consumed {
		s.consumed[v] = true
	}
	for _, op := range m.inflight {
		for _, v := range op.adds {
			s.maybe[v] = true
		}
		for _, v := range op.removes {
			s.maybe[v] = true
		}
		s.pops += op.pops
	}
	return s
}

// verify checks what the store holds after the crash (count by value)
// against the model.
func (s runSnapshot) verify(t *testing.T, present map[int]int) bool {
	t.Helper()
	var missing []int
	for v, n := range present {
		require.Equal(t, 1, n, "message %d is there %d times", v, n)
		require.False(t, s.consumed[v], "message %d was consumed before the crash and is back", v)
		require.True(t, s.live[v] || s.maybe[v], "message %d was never enqueued", v)
	}
	for v := range s.live {
		if present[v] == 0 && !s.maybe[v] {
			missing = append(missing, v)
		}
	}
	slices.Sort(missing)
	return assert.LessOrEqual(t, len(missing), s.pops, "messages lost (Pops in flight: up to %d): %v", s.pops, missing)
}

// dumpQueue logs queue q's state key and every item key, from sequence
// number 0.
func dumpQueue(t *testing.T, s engine.Store) {
	t.Helper()
	v, err := s.Get(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "q"))
	if err == nil {
		st, err := queuefmt.ParseState(v)
		t.Logf("state %+v %v", st, err)
	}
	ip := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "q")
	it, err := s.NewIter(ip, codec.PrefixEnd(ip))
	require.NoError(t, err)
	defer it.Close()
	var seqs []int64
	for ok := it.First(); ok; ok = it.Next() {
		seq, _, _ := codec.DecodeAsc(it.Key()[len(ip):])
		seqs = append(seqs, seq)
	}
	t.Logf("items %v", seqs)
}

// runWorker runs steps random queue operations, recording each in m, and
// calls at(step) after each.
func runWorker(t *testing.T, rng *rand.Rand, db *tipkv.DB, q *queue.Queue[int], m *runModel, steps, w int, at func(int)) {
	abort := errors.New("abort")
	var leased []queue.Message[int]
	fail := func(err error, what string) bool {
		if err != nil && !errors.Is(err, tipkv.ErrClosed) {
			t.Errorf("worker %d: %s: %v", w, what, err)
			return true
		}
		return false
	}
	for step := range steps {
		switch r := rng.IntN(20); {
		case r < 7:
			vs := m.values(1 + rng.IntN(20))
			m.begin(w, runOp{adds: vs})
			err := db.Update(func(b *tipkv.Batch) error {
				if _, err := q.Enqueue(b, vs...); err != nil {
					return err
				}
				if rng.IntN(8) == 0 {
					return abort
				}
				return nil
			})
			m.note(fmt.Sprintf("w%d enqueue %v", w, err), vs)
			if errors.Is(err, abort) {
				m.end(w, nil, nil)
			} else if fail(err, "enqueue") {
				return
			} else {
				m.end(w, vs, nil)
			}
		case r < 11:
			n := 1 + rng.IntN(10)
			m.begin(w, runOp{pops: n})
			ms, err := q.Pop(n)
			if fail(err, "pop") {
				return
			}
			m.note(fmt.Sprintf("w%d pop", w), msgValues(ms))
			m.end(w, nil, msgValues(ms))
		case r < 16:
			ms, err := q.Receive(1+rng.IntN(60), time.Hour)
			if fail(err, "receive") {
				return
			}
			m.note(fmt.Sprintf("w%d receive", w), msgValues(ms))
			leased = append(leased, ms...)
			// Mostly in order, all or a prefix; sometimes shuffled.
			if rng.IntN(4) == 0 {
				rng.Shuffle(len(leased), func(i, j int) { leased[i], leased[j] = leased[j], leased[i] })
			}
			n := len(leased)
			if rng.IntN(3) == 0 {
				n = rng.IntN(len(leased) + 1)
			}
			ids := make([]queue.ID, n)
			for i, m := range leased[:n] {
				ids[i] = m.ID
			}
			vs := msgValues(leased[:n])
			m.begin(w, runOp{removes: vs})
			err = q.Ack(db, ids...)
			m.note(fmt.Sprintf("w%d ack %v", w, err), vs)
			if fail(err, "ack") {
				return
			}
			m.end(w, nil, vs)
			leased = leased[n:]
		case r < 18:
			// Give some back: they are delivered again, and after three
			// deliveries moved to the dead-letter queue.
			for len(leased) > 0 && rng.IntN(3) != 0 {
				m.note(fmt.Sprintf("w%d release", w), []int{leased[0].Value})
				if fail(q.Release(leased[0].ID, 0), "release") {
					return
				}
				leased = leased[1:]
			}
		case r < 19:
			var seqs []int64
			var vs []int
			for d, err := range q.DeadLetters() {
				if fail(err, "dead letters") {
					return
				}
				if rng.IntN(2) == 0 {
					seqs, vs = append(seqs, d.Seq), append(vs, d.Value)
				}
			}
			if rng.IntN(2) == 0 {
				// Requeue moves them back to the queue, as new messages.
				err := q.Requeue(db, seqs...)
				m.note(fmt.Sprintf("w%d requeue %v", w, err), vs)
				if err != nil && !raced(err) {
					fail(err, "requeue")
					return
				}
			} else {
				m.begin(w, runOp{removes: vs})
				err := q.Discard(db, seqs...)
				m.note(fmt.Sprintf("w%d discard %v", w, err), vs)
				if err != nil && !raced(err) {
					fail(err, "discard")
					return
				}
				if err == nil {
					m.end(w, nil, vs)
				} else {
					m.end(w, nil, nil) // the other worker took one first
				}
			}
		default:
			if fail(q.SetMaxInFlight(db, []int{0, 0, 40}[rng.IntN(3)]), "cap") {
				return
			}
		}
		at(step)
	}
}

// raced reports whether a Requeue or Discard failed because the other
// worker moved one of its dead letters first.
func raced(err error) bool {
	return errors.Is(err, tipkv.ErrNotFound) || errors.Is(err, tipkv.ErrConflict)
}

func msgValues(ms []queue.Message[int]) []int {
	vs := make([]int, len(ms))
	for i, m := range ms {
		vs[i] = m.Value
	}
	return vs
}

// pointsStore is a store whose iterators report, when they close, how many
// point keys they stepped on (tombstones and older versions included:
// pebblestore's PointsRead); it keeps the most.
type pointsStore struct {
	engine.Store
	mu   sync.Mutex
	most uint64
}

func (s *pointsStore) NewIter(lo, hi []byte) (engine.Iter, error) {
	it, err := s.Store.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	return &pointsIter{Iter: it, s: s}, nil
}

func (s *pointsStore) take() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.most
	s.most = 0
	return n
}

type pointsIter struct {
	engine.Iter
	s *pointsStore
}

func (i *pointsIter) Close() error {
	if pr, ok := i.Iter.(interface{ PointsRead() uint64 }); ok {
		n := pr.PointsRead()
		i.s.mu.Lock()
		i.s.most = max(i.s.most, n)
		i.s.mu.Unlock()
	}
	return i.Iter.Close()
}

// openPoints opens a DB on fs as openFS does, through a pointsStore.
func openPoints(t *testing.T, fs vfs.FS) (*tipkv.DB, *pointsStore) {
	t.Helper()
	ps, err := pebblestore.Open("db", pebblestore.Config{FS: fs, CacheSize: 128 << 20, MemTableSize: 16 << 20, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, err)
	s := &pointsStore{Store: ps}
	db, err := tipkv.OpenEngine(s, "db", nil)
	require.NoError(t, err)
	require.NoError(t, ps.Created())
	t.Cleanup(func() { _ = db.Close() })
	return db, s
}

// After a crash, Open steps over at most about knobs.Queue.StateEvery
// consumed numbers, whatever was consumed since the queue-state key was
// last written: consumes write it at least that often, and Open seeks
// from the stored head. Counted by the point keys (tombstones and older
// versions of the messages included) its iterators step on, for consumes
// by Pop(1) (a point delete each) and by Receive(200)+Ack (a range delete
// each); then Len is exact and the next message is the first not
// consumed.
func TestCrashQueueWalkBounded(t *testing.T) {
	for _, every := range []int{64, 1024} {
		for _, mode := range []string{"pop-1", "ack-200"} {
			t.Run(fmt.Sprintf("every=%d,consume=%s", every, mode), func(t *testing.T) {
				defer knobs.Set(&knobs.Queue.StateEvery, every)()
				rng := rand.New(rand.NewPCG(uint64(every), 1))
				fs := vfs.NewCrashableMem()
				db, err := openFS("db", fs, nil)
				require.NoError(t, err)
				q, err := queue.Open[int](db, "q", nil)
				require.NoError(t, err)
				total := 8*every + 1000
				for i := 0; i < total; i += 1000 {
					vs := make([]int, min(1000, total-i))
					for j := range vs {
						vs[j] = i + j
					}
					_, err := q.Enqueue(db, vs...)
					require.NoError(t, err)
				}
				// Consume across several of the key's writes, ending
				// anywhere in a run.
				consumed := 4*every + rng.IntN(every)
				for done := 0; done < consumed; {
					var ms []queue.Message[int]
					if mode == "pop-1" {
						ms, err = q.Pop(1)
						require.NoError(t, err)
					} else {
						ms, err = q.Receive(min(200, consumed-done), time.Hour)
						require.NoError(t, err)
						ids := make([]queue.ID, len(ms))
						for i, m := range ms {
							ids[i] = m.ID
						}
						require.NoError(t, q.Ack(db, ids...))
					}
					done += len(ms)
				}
				crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // writes are synced: all of them
				require.NoError(t, db.Close())

				db, s := openPoints(t, crashed)
				s.take()
				q, err = queue.Open[int](db, "q", nil)
				require.NoError(t, err)
				walked := s.take()
				t.Logf("%d consumed; Open stepped on at most %d point keys in one iterator", consumed, walked)
				// Measured: about one point key per consumed number in the
				// run with point deletes, far fewer with range deletes;
				// without the bound, one per number consumed since the
				// first write (308 and 4,297 here). Older versions of a
				// message may add one each.
				require.LessOrEqual(t, walked, uint64(2*every+8), "Open walked past the run")
				require.Equal(t, total-consumed, q.Len())
				ms, err := q.Pop(1)
				require.NoError(t, err)
				require.Equal(t, consumed, ms[0].Value)
			})
		}
	}
}

// A run of consumes never ends at a gap it cannot see: after a reopen the
// queue does not know which numbers before the tail an aborted enqueue
// left empty, so a Pop that reaches one writes the state key; otherwise a
// crash would make Open take the gap off the count as if it had been
// consumed.
func TestCrashQueueRunGapAfterReopen(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db, err := openFS("db", fs, nil)
	require.NoError(t, err)
	q, err := queue.Open[int](db, "q", nil)
	require.NoError(t, err)
	_, err = q.Enqueue(db, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	require.NoError(t, err)
	abort := errors.New("abort")
	require.ErrorIs(t, db.Update(func(b *tipkv.Batch) error {
		if _, err := q.Enqueue(b, 0, 0, 0, 0, 0); err != nil {
			return err
		}
		return abort
	}), abort)
	_, err = q.Enqueue(db, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	require.NoError(t, err)
	require.NoError(t, db.Close()) // stores the state

	db, err = openFS("db", fs, nil)
	require.NoError(t, err)
	q, err = queue.Open[int](db, "q", nil)
	require.NoError(t, err)
	for want := 1; want <= 10; want++ {
		ms, err := q.Pop(1)
		require.NoError(t, err)
		require.Equal(t, want, ms[0].Value)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	require.NoError(t, db.Close())

	db, err = openFS("db", crashed, nil)
	require.NoError(t, err)
	defer db.Close()
	q, err = queue.Open[int](db, "q", nil)
	require.NoError(t, err)
	require.Equal(t, 10, q.Len())
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	require.NoError(t, check.Store(s, check.Options{}).Err())
}
