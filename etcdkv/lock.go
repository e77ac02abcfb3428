package etcdkv

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Prefix locks for the writers of a hot document, stream or queue
// (engine.Locker): tipkv's writes read, then commit on the condition that
// what they read still holds, and writers of one key that keep colliding
// take its lock first, so that they read it in turn instead of failing.
//
// A lock is etcd's own recipe (concurrency.Mutex): each caller puts a key
// under the lock's directory, attached to its session's lease, and the
// key created first holds the lock; the others watch the key before
// theirs and hold it when every earlier key is gone. The directory of a
// prefix's lock is
//
//	<namespace> FF×64 "locks/" <prefix in hex> "/" <lease id in hex>
//
// so it lies in the store's namespace (deleting the namespace's keys in
// etcd takes the locks too) but above codec.Keyspace, the range every key
// tipkv writes lies in and every walk of the whole store stays inside:
// iterators, watches, dumps and deletes of tipkv never meet a lock key.
// (An engine.Store caller that reads above FF×64 itself would.)
//
// A Store has one session, made at its first Lock and kept alive until
// Close, which revokes its lease and with it every lock key the store
// holds or waits with. If the process dies, or cannot reach the cluster
// for Config.LockTTL, the lease expires and its keys go: a dead holder
// blocks the others for LockTTL at most. A lock whose lease expired while
// it was held is lost without its holder hearing of it; since the locks
// are advisory (conditions still decide every commit) that costs
// collisions, never a wrong write. Goroutines of one process queue for a
// lock in memory first, so a store puts at most one key per lock however
// many of its goroutines wait.

// lockRoot is where lock directories start, after the namespace: the upper
// bound of codec.Keyspace, then "locks/".
var lockRoot = func() []byte {
	_, hi := codec.Keyspace()
	return append(hi, "locks/"...)
}()

// lockDir returns the etcd key of prefix's lock directory, without the
// "/" that concurrency.Mutex puts after it.
func (s *Store) lockDir(prefix []byte) string {
	b := make([]byte, 0, len(s.ns)+len(lockRoot)+2*len(prefix))
	b = append(append(b, s.ns...), lockRoot...)
	return string(hex.AppendEncode(b, prefix))
}

// procLock is a lock's queue in this process: a token in ch while a
// goroutine of the process holds or asks the cluster for it.
//
// A goroutine that unlocks while others of the process wait for the lock
// passes its cluster lock on instead of deleting its key (passed), up to
// maxPasses times in a row: the next holder then skips a delete, a watch
// and a put, the round trips that made a hot key's lock changing hands
// inside a process cost as much as the writes it guards. Only a Lock of
// that one prefix takes a passed lock; a Lock of several deletes every
// passed key before it queues on the cluster for any, so locks are still
// taken in byte order (a passed lock held while waiting for one before it
// deadlocked: TestPassedLockNeverHeldOutOfOrder).
type procLock struct {
	ch   chan struct{}
	refs int // goroutines holding or waiting for it; guarded by procLocks.mu

	// Guarded by the token, and read by the goroutine whose unref ends
	// the queue.
	passed     *concurrency.Mutex   // the cluster lock left to the next holder, or nil
	passedSess *concurrency.Session // passed's session
	passes     int                  // times the current key was passed on
}

// maxPasses is how many times in a row a process passes a cluster lock
// from goroutine to goroutine before it deletes the key and queues again
// behind other processes' waiters, so that a busy process does not keep a
// lock from the others.
const maxPasses = 8

// procLocks are the process's lock queues, by prefix.
type procLocks struct {
	mu sync.Mutex
	m  map[string]*procLock
}

func (p *procLocks) ref(prefix []byte) *procLock {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*procLock{}
	}
	l := p.m[string(prefix)]
	if l == nil {
		l = &procLock{ch: make(chan struct{}, 1)}
		p.m[string(prefix)] = l
	}
	l.refs++
	return l
}

// unref leaves l's queue. The last to leave gets the cluster lock passed
// to a waiter that left instead of taking it, to delete.
func (p *procLocks) unref(prefix []byte, l *procLock) (*concurrency.Mutex, *concurrency.Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.refs--; l.refs > 0 {
		return nil, nil
	}
	delete(p.m, string(prefix))
	m, sess := l.passed, l.passedSess
	l.passed, l.passedSess = nil, nil
	return m, sess
}

// waiters reports whether goroutines other than the token's holder hold
// a reference to l: they wait for its token.
func (p *procLocks) waiters(l *procLock) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return l.refs > 1
}

// session returns the store's lock session, making one (a lease of
// LockTTL, kept alive until Close) if there is none or its lease was lost.
func (s *Store) session(ctx context.Context) (*concurrency.Session, error) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.sess != nil {
		select {
		case <-s.sess.Done():
			s.sess = nil // the keep-alive stopped: the lease may have expired
		default:
			return s.sess, nil
		}
	}
	rctx, cancel := s.reqCtx()
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	// The lease is granted here, within the request's deadline; the
	// session would grant it with its own context, which never times out.
	ttl := (s.cfg.LockTTL + time.Second - 1) / time.Second
	lease, err := s.c.Grant(rctx, int64(ttl))
	if err != nil {
		return nil, fmt.Errorf("tipkv: etcd: lock: grant a lease: %w", err)
	}
	sess, err := concurrency.NewSession(s.c, concurrency.WithLease(lease.ID), concurrency.WithContext(s.ctx))
	if err != nil {
		return nil, fmt.Errorf("tipkv: etcd: lock: keep a lease alive: %w", err)
	}
	s.sess = sess
	return sess, nil
}

// dropSession stops keeping sess alive and revokes its lease, taking every
// key put with it, after a key could not be deleted: a lock key left
// behind would block other writers until the store closed; without its
// lease it goes at once, or after LockTTL if the revoke fails too. The
// store's other locks go with it (they are advisory); the next Lock makes
// a new session.
func (s *Store) dropSession(sess *concurrency.Session) {
	s.lmu.Lock()
	if s.sess == sess {
		s.sess = nil
	}
	s.lmu.Unlock()
	sess.Orphan()
	if s.isClosed.Load() {
		return // Close revokes it, or has
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	_, _ = s.c.Revoke(ctx, sess.Lease())
}

// closeSession revokes the lease of the store's session, if it has one:
// at Close, after every call has returned and before the client closes.
func (s *Store) closeSession() {
	s.lmu.Lock()
	sess := s.sess
	s.sess = nil
	s.lmu.Unlock()
	if sess == nil {
		return
	}
	sess.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	_, _ = s.c.Revoke(ctx, sess.Lease()) // if this fails, the lease expires after LockTTL
}

// Lock implements engine.Locker. The prefixes' locks are taken in byte
// order, in memory and then on the cluster, so two callers asking for
// overlapping sets never deadlock; waited says whether any was held or
// asked for by another caller. A wait ends with ctx or with Close, which
// fails it with an error matching engine.ErrClosed. unlock deletes the
// store's keys, or passes a lock on to a goroutine of this store that
// waits for it (procLock); if a delete fails, the store drops its
// session, whose keys then go at once or after Config.LockTTL. The locks
// are advisory: see engine.Locker, and the top of this file for when one
// is lost.
func (s *Store) Lock(ctx context.Context, prefixes [][]byte) (unlock func(), waited bool, err error) {
	if err := s.enter(); err != nil {
		return nil, false, err
	}
	defer s.exit()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	ps := make([][]byte, 0, len(prefixes))
	for _, p := range prefixes {
		ps = append(ps, bytes.Clone(p))
	}
	slices.SortFunc(ps, bytes.Compare)
	ps = slices.CompactFunc(ps, bytes.Equal)

	var mine []*procLock           // in-memory tokens held, in ps's order
	var held []*concurrency.Mutex  // cluster locks held, in ps's order
	var sess *concurrency.Session  // the session of held
	release := func(sessOK bool) { // gives back what is held, last first
		if sessOK && len(held) > 0 {
			alive := s.live(sess)
			ok := true
			for i := len(held) - 1; i >= 0; i-- {
				l := mine[i]
				if alive && l.passes < maxPasses && s.plocks.waiters(l) {
					l.passed, l.passedSess = held[i], sess
					l.passes++
					continue
				}
				l.passes = 0
				ok = s.unlockKey(held[i]) && ok
			}
			if !ok || !alive {
				s.dropSession(sess)
			}
		}
		for i := len(mine) - 1; i >= 0; i-- {
			<-mine[i].ch
			if m, ms := s.plocks.unref(ps[i], mine[i]); m != nil && !s.unlockKey(m) {
				s.dropSession(ms)
			}
		}
	}
	fail := func(err error) (func(), bool, error) {
		if s.isClosed.Load() {
			// Close revokes the session's lease, and its keys with it.
			release(false)
			return nil, waited, fmt.Errorf("tipkv: etcd: lock: %w (%v)", engine.ErrClosed, err)
		}
		release(true)
		return nil, waited, fmt.Errorf("tipkv: etcd: lock: %w", err)
	}

	for _, p := range ps {
		l := s.plocks.ref(p)
		select {
		case l.ch <- struct{}{}:
		default:
			waited = true
			select {
			case l.ch <- struct{}{}:
			case <-ctx.Done():
				if m, ms := s.plocks.unref(p, l); m != nil && !s.unlockKey(m) {
					s.dropSession(ms)
				}
				return fail(ctx.Err())
			}
		}
		mine = append(mine, l)
	}

	sess, err = s.session(ctx)
	if err != nil {
		return fail(err)
	}
	// Locks passed on by goroutines of this process: one Lock of one
	// prefix takes it; otherwise every passed key goes before this Lock
	// queues for any, since a key held while waiting for a lock before it
	// in byte order could deadlock with a store that holds that one and
	// waits for this.
	var passed *concurrency.Mutex
	for _, l := range mine {
		if l.passed == nil {
			continue
		}
		m, ms := l.passed, l.passedSess
		l.passed, l.passedSess = nil, nil
		if len(ps) == 1 && ms == sess && s.live(sess) {
			passed = m
			continue
		}
		l.passes = 0
		if !s.unlockKey(m) {
			s.dropSession(ms)
			if ms == sess {
				release(false)
				return nil, waited, fmt.Errorf("tipkv: etcd: lock: could not delete a lock key passed on")
			}
		}
	}
	if passed != nil {
		held = append(held, passed)
	}
	for _, p := range ps[len(held):] {
		m := concurrency.NewMutex(sess, s.lockDir(p))
		if err := m.Lock(ctx); err != nil {
			// Lock deletes its key when its wait fails, not when its
			// first request does (that put may have landed): this
			// process is the only one that writes the key, so delete it
			// here, or drop the session if that fails too.
			if !s.isClosed.Load() && !s.deleteKey(m.Key()) {
				s.dropSession(sess)
				release(false)
				return nil, waited, fmt.Errorf("tipkv: etcd: lock: %w", err)
			}
			if errors.Is(err, concurrency.ErrSessionExpired) || errors.Is(err, rpctypes.ErrLeaseNotFound) {
				s.dropSession(sess)
			}
			return fail(err)
		}
		held = append(held, m)
		if ownerRev(m) != m.Header().Revision {
			// The mutex read its header after a wait, not from the txn
			// that created its key.
			waited = true
		}
	}

	var once sync.Once
	return func() {
		once.Do(func() { release(true) })
	}, waited, nil
}

// ownerRev is the create revision of the mutex's key.
func ownerRev(m *concurrency.Mutex) int64 {
	if cr, ok := m.IsOwner().TargetUnion.(*pb.Compare_CreateRevision); ok {
		return cr.CreateRevision
	}
	return 0
}

// live reports whether sess is the store's session and its lease is
// kept alive.
func (s *Store) live(sess *concurrency.Session) bool {
	s.lmu.Lock()
	cur := s.sess
	s.lmu.Unlock()
	if cur != sess {
		return false
	}
	select {
	case <-sess.Done():
		return false
	default:
		return true
	}
}

// unlockKey deletes the key of a cluster lock, and reports whether it is
// gone. After Close it does nothing: the revoked lease took it.
func (s *Store) unlockKey(m *concurrency.Mutex) bool {
	if err := s.enter(); err != nil {
		return true
	}
	defer s.exit()
	ctx, cancel := s.reqCtx()
	defer cancel()
	err := m.Unlock(ctx)
	return err == nil || errors.Is(err, concurrency.ErrLockReleased)
}

// deleteKey deletes one of the store's lock keys, and reports whether it
// is gone. An empty key, or the mutex's "\x00" for none, is gone.
func (s *Store) deleteKey(key string) bool {
	if key == "" || key == "\x00" {
		return true
	}
	ctx, cancel := s.reqCtx()
	defer cancel()
	_, err := s.c.Delete(ctx, key)
	return err == nil
}

// lockCmp is the compare that prefix's lock directory holds no key: no
// other caller of Lock holds or waits for it. A compare over a range
// holds on an empty range (the server compares the zero key-value, whose
// create revision is 0) and fails on any stored key (created at a revision
// above 0).
func (s *Store) lockCmp(prefix []byte) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(s.lockDir(prefix)+"/"), "=", 0).WithPrefix()
}
