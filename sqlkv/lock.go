package sqlkv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tipkv/tipkv/engine"
)

// Prefix locks for the writers of a hot document, stream or queue
// (engine.Locker): tipkv's writes read, then commit on the condition that
// what they read still holds, and writers of one key that keep colliding
// take its lock first, so that they read it in turn instead of failing.
//
// A lock is a session-level advisory lock on PostgreSQL, in the two-int4
// key space (pg_advisory_lock(int4, int4)), which never meets the bigint
// keys a batch's guard takes (plan.go), so a holder's own batches, on
// other connections, never wait for it. It is held on a connection of the
// pool until unlock; the server drops it if that connection breaks or the
// process dies. Goroutines of one process queue for a lock in memory
// first, so a process holds at most one connection per lock however many
// of its goroutines wait.

var _ engine.Locker = (*Store)(nil)

// procLock is a lock's queue in this process: a token in ch while a
// goroutine of the process holds or asks the server for it.
//
// A goroutine that unlocks while others of the process wait for the lock
// passes its server lock on (passed: the connection whose session holds
// it) instead of unlocking it, up to maxPasses times in a row: the next
// holder then skips the unlock's and the lock's round trips, which cost
// as much as the write they guard when a hot key's lock changes hands
// inside a process. Only a Lock of that one prefix takes a passed lock; a
// Lock of several unlocks it and queues on the server like any other, so
// locks are still taken in order (a passed lock held while waiting for
// another could deadlock).
type procLock struct {
	ch   chan struct{}
	refs int // goroutines holding or waiting for it; guarded by procLocks.mu

	// Guarded by the token, and read by the goroutine whose unref ends
	// the queue.
	passed *pgxpool.Conn // the session holding the server lock, left to the next holder
	passes int           // times the server lock was passed on in a row
}

// maxPasses is how many times in a row a process passes a server lock
// from goroutine to goroutine before it unlocks it and queues again
// behind other processes' waiters, so that a busy process does not keep a
// lock from the others.
const maxPasses = 8

// procLocks are the process's lock queues, by lock id.
type procLocks struct {
	mu sync.Mutex
	m  map[[2]int32]*procLock
}

func (p *procLocks) ref(id [2]int32) *procLock {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[[2]int32]*procLock{}
	}
	l := p.m[id]
	if l == nil {
		l = &procLock{ch: make(chan struct{}, 1)}
		p.m[id] = l
	}
	l.refs++
	return l
}

// unref leaves l's queue. The last to leave unlocks a server lock passed
// to a waiter that left instead of taking it.
func (p *procLocks) unref(id [2]int32, l *procLock) {
	p.mu.Lock()
	if l.refs--; l.refs > 0 {
		p.mu.Unlock()
		return
	}
	delete(p.m, id)
	conn := l.passed
	l.passed = nil
	p.mu.Unlock()
	if conn != nil {
		unlockConn(conn)
	}
}

// waiters reports whether goroutines other than the token's holder hold
// a reference to l: they wait for its token.
func (p *procLocks) waiters(l *procLock) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return l.refs > 1
}

// writerLockID is the lock of the writers of prefix: two int4 keys from
// the table's salt and the prefix.
func (s *Store) writerLockID(prefix []byte) [2]int32 {
	h := fnv.New64a()
	var salt [8]byte
	for i := range salt {
		salt[i] = byte(s.salt >> (8 * i))
	}
	h.Write(salt[:])
	h.Write([]byte("writers"))
	h.Write(prefix)
	v := h.Sum64()
	return [2]int32{int32(v >> 32), int32(v)}
}

// Lock implements engine.Locker on PostgreSQL; other dialects fail with
// errors.ErrUnsupported. Locks are taken in the order of their ids, in
// memory and then on the server, so two callers asking for overlapping
// sets never deadlock. It holds a connection of the pool from its return
// until unlock; Close cuts a wait short with ErrClosed.
func (s *Store) Lock(ctx context.Context, prefixes [][]byte) (unlock func(), waited bool, err error) {
	if s.cfg.Dialect != Postgres {
		return nil, false, fmt.Errorf("sqlkv: prefix locks on %v: %w", s.cfg.Dialect, errors.ErrUnsupported)
	}
	if err := s.enter(); err != nil {
		return nil, false, err
	}
	defer s.exit()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()

	ids := make([][2]int32, 0, len(prefixes))
	for _, p := range prefixes {
		ids = append(ids, s.writerLockID(p))
	}
	slices.SortFunc(ids, func(a, b [2]int32) int {
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return cmp.Compare(a[1], b[1])
	})
	ids = slices.Compact(ids)

	var mine []*procLock
	release := func() {
		for i, l := range mine {
			<-l.ch
			s.plocks.unref(ids[i], l)
		}
	}
	fail := func(err error) (func(), bool, error) {
		release()
		if s.closedFlag.Load() {
			err = fmt.Errorf("%w: sqlkv: lock: %v", engine.ErrClosed, err)
		}
		return nil, waited, err
	}
	for _, id := range ids {
		l := s.plocks.ref(id)
		select {
		case l.ch <- struct{}{}:
		default:
			waited = true
			select {
			case l.ch <- struct{}{}:
			case <-ctx.Done():
				s.plocks.unref(id, l)
				return fail(ctx.Err())
			}
		}
		mine = append(mine, l)
	}

	// A lock passed on by a goroutine of this process (procLock).
	var conn *pgxpool.Conn
	for _, l := range mine {
		if l.passed == nil {
			continue
		}
		if len(ids) == 1 && !l.passed.Conn().IsClosed() {
			conn = l.passed
		} else {
			unlockConn(l.passed)
			l.passes = 0
		}
		l.passed = nil
	}
	if conn == nil {
		var err error
		if conn, err = s.lockConn(ctx, ids, &waited); err != nil {
			return fail(err)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if l := mine[0]; len(mine) == 1 && l.passes < maxPasses && s.plocks.waiters(l) && !s.closedFlag.Load() {
				l.passed = conn
				l.passes++
			} else {
				for _, l := range mine {
					l.passes = 0
				}
				unlockConn(conn)
			}
			release()
		})
	}, waited, nil
}

// lockConn takes the server locks of ids on a connection of the pool and
// returns it; on failure the connection is closed, with whatever its
// session took.
func (s *Store) lockConn(ctx context.Context, ids [][2]int32, waited *bool) (*pgxpool.Conn, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlkv: lock: acquire a connection: %w", err)
	}
	drop := func() {
		// The session's locks go with it.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}
	for _, id := range ids {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", id[0], id[1]).Scan(&ok); err != nil {
			drop()
			return nil, fmt.Errorf("sqlkv: lock: %w", err)
		}
		if ok {
			continue
		}
		*waited = true
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", id[0], id[1]); err != nil {
			drop()
			return nil, fmt.Errorf("sqlkv: lock: %w", err)
		}
	}
	return conn, nil
}

// unlockConn releases every lock the connection's session holds and gives
// the connection back, or closes it (which releases them too).
func unlockConn(conn *pgxpool.Conn) {
	if _, err := conn.Exec(context.Background(), "SELECT pg_advisory_unlock_all()"); err != nil {
		_ = conn.Conn().Close(context.Background())
	}
	conn.Release()
}
