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
type procLock struct {
	ch   chan struct{}
	refs int // goroutines holding or waiting for it
}

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

func (p *procLocks) unref(prefix []byte, l *procLock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(p.m, string(prefix))
	}
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
// store's keys; if a delete fails, the store drops its session, whose
// keys then go at once or after Config.LockTTL. The locks are advisory:
// see engine.Locker, and the top of this file for when one is lost.
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
			if !s.unlockAll(sess, held) {
				s.dropSession(sess)
			}
		}
		for i := len(mine) - 1; i >= 0; i-- {
			<-mine[i].ch
			s.plocks.unref(ps[i], mine[i])
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
				s.plocks.unref(p, l)
				return fail(ctx.Err())
			}
		}
		mine = append(mine, l)
	}

	sess, err = s.session(ctx)
	if err != nil {
		return fail(err)
	}
	for _, p := range ps {
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

// unlockAll deletes the keys of held, last first, and reports whether
// they are all gone. After Close it does nothing: the revoked lease took
// them.
func (s *Store) unlockAll(sess *concurrency.Session, held []*concurrency.Mutex) bool {
	if err := s.enter(); err != nil {
		return true
	}
	defer s.exit()
	ok := true
	for i := len(held) - 1; i >= 0; i-- {
		ctx, cancel := s.reqCtx()
		err := held[i].Unlock(ctx)
		cancel()
		if err != nil && !errors.Is(err, concurrency.ErrLockReleased) {
			ok = false
		}
	}
	select {
	case <-sess.Done():
		return false // the lease may be gone, and with it what others saw
	default:
	}
	return ok
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
