package etcdkv

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tipkv/tipkv/engine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Administration. etcd keeps every revision of every key until the cluster
// is compacted, and a compaction frees pages inside its database file
// without shrinking it until each member is defragmented. Both are
// cluster-wide: they act on every namespace, not only the store's.
//
// Production clusters usually compact by themselves
// (--auto-compaction-mode, --auto-compaction-retention); defragment then
// by hand or with a schedule, one member at a time, while the members'
// database sizes stay well under the quota (--quota-backend-bytes, 2 GiB by
// default, 8 GiB the most etcd advises): a member over it raises the
// NOSPACE alarm and refuses writes until compacted, defragmented and the
// alarm disarmed.

// adminTimeout bounds a defragmentation: the member rewrites its whole
// database, refusing reads and writes meanwhile.
const adminTimeout = 5 * time.Minute

// MemberStatus is what one member says of itself.
type MemberStatus struct {
	Endpoint    string
	Version     string
	DBSize      int64 // bytes of the database file
	DBSizeInUse int64 // bytes in use in it; the rest is freed by Defragment
	DBSizeQuota int64 // the member's quota (--quota-backend-bytes)
	IsLeader    bool
	RaftIndex   uint64
	RaftTerm    uint64
	Revision    int64
	Errors      []string // alarms and the like
	Err         error    // the member did not answer
}

// Status asks every endpoint of the client for its status. A member that
// does not answer has Err set; Status itself fails only when the store is
// closed.
func (s *Store) Status(ctx context.Context) ([]MemberStatus, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	var out []MemberStatus
	for _, ep := range s.c.Endpoints() {
		rctx, cancel := s.reqCtx()
		stop := context.AfterFunc(ctx, cancel)
		r, err := s.c.Status(rctx, ep)
		stop()
		cancel()
		m := MemberStatus{Endpoint: ep, Err: err}
		if err == nil {
			m.Version, m.DBSize, m.DBSizeInUse, m.DBSizeQuota = r.Version, r.DbSize, r.DbSizeInUse, r.DbSizeQuota
			m.IsLeader = r.Leader == r.Header.MemberId
			m.RaftIndex, m.RaftTerm, m.Revision, m.Errors = r.RaftIndex, r.RaftTerm, r.Header.Revision, r.Errors
		}
		out = append(out, m)
	}
	return out, nil
}

// CompactRevisions discards the history of every key before revision rev,
// cluster-wide, and waits until the members have freed it. A read pinned to
// an older revision (an iterator's later pages, a snapshot) then fails with
// ErrCompacted.
func (s *Store) CompactRevisions(ctx context.Context, rev int64) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	rctx, cancel := s.reqCtx()
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	if _, err := s.c.Compact(rctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return s.readErr(fmt.Sprintf("compact to revision %d", rev), err)
	}
	return nil
}

// Defragment rewrites each member's database in turn, returning the space
// compaction freed to the file system. A member refuses requests while it
// runs (seconds per GiB); the client sends them to the others.
func (s *Store) Defragment(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	for _, ep := range s.c.Endpoints() {
		dctx, cancel := context.WithTimeout(s.ctx, adminTimeout)
		stop := context.AfterFunc(ctx, cancel)
		_, err := s.c.Defragment(dctx, ep)
		stop()
		cancel()
		if err != nil {
			return s.readErr("defragment "+ep, err)
		}
	}
	return nil
}

// Flush implements engine.Admin: nothing to do, a committed txn is on disk.
func (s *Store) Flush() error {
	if s.isClosed.Load() {
		return engine.ErrClosed
	}
	return nil
}

// Compact implements engine.Admin: it compacts the cluster's history up to
// the current revision and defragments every member. lo and hi are ignored:
// etcd compacts revisions, not key ranges, and for the whole cluster.
func (s *Store) Compact(lo, hi []byte) error {
	ctx := context.Background()
	rev, err := s.Revision(ctx)
	if err != nil {
		return err
	}
	if err := s.CompactRevisions(ctx, rev); err != nil {
		return err
	}
	return s.Defragment(ctx)
}

// DiskUsage implements engine.Admin: the largest database file among the
// members that answer (what counts against the quota).
func (s *Store) DiskUsage() (uint64, error) {
	ms, err := s.Status(context.Background())
	if err != nil {
		return 0, err
	}
	var most int64
	var firstErr error
	answered := false
	for _, m := range ms {
		if m.Err != nil {
			if firstErr == nil {
				firstErr = m.Err
			}
			continue
		}
		answered = true
		most = max(most, m.DBSize)
	}
	if !answered && firstErr != nil {
		return 0, s.readErr("status", firstErr)
	}
	return uint64(most), nil
}

// Metrics implements engine.Admin: a line per member.
func (s *Store) Metrics() (string, error) {
	ms, err := s.Status(context.Background())
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "etcd, namespace %q\n", s.ns)
	for _, m := range ms {
		if m.Err != nil {
			fmt.Fprintf(&b, "%s: no answer: %v\n", m.Endpoint, m.Err)
			continue
		}
		role := "follower"
		if m.IsLeader {
			role = "leader"
		}
		fmt.Fprintf(&b, "%s: %s v%s, db %d bytes (%d in use, quota %d), revision %d, raft index %d term %d",
			m.Endpoint, role, m.Version, m.DBSize, m.DBSizeInUse, m.DBSizeQuota, m.Revision, m.RaftIndex, m.RaftTerm)
		if len(m.Errors) > 0 {
			fmt.Fprintf(&b, ", errors: %s", strings.Join(m.Errors, "; "))
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}
