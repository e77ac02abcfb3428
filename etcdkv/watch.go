package etcdkv

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch implements engine.Watcher with an etcd watch on [lo, hi).
//
// Watch first reads the cluster's current revision r (a linearizable
// read), then watches from r+1: every change committed after Watch
// returns has a revision above r, so none is missed, even though the
// server creates the watch later. The channel receives a value after each
// response holding events (several changes may share one wake-up).
//
// The channel is closed when ctx ends, when the store closes, and when the
// watch breaks: the member serving it loses its leader (the watch is made
// with WithRequireLeader, so a partitioned member does not keep it silent),
// the revision to resume from was compacted (after a disconnection: the
// client resumes watches by itself otherwise), or the server cancels it.
// After a close the caller re-reads what it waits on and watches again.
func (s *Store) Watch(ctx context.Context, lo, hi []byte) (<-chan struct{}, error) {
	if len(lo) == 0 || hi == nil {
		return nil, fmt.Errorf("tipkv: internal error: unbounded watch [%x, %x)", lo, hi)
	}
	rev, err := s.Revision(ctx)
	if err != nil {
		return nil, err
	}
	return s.watchFrom(ctx, lo, hi, rev+1)
}

// watchFrom watches [lo, hi) from revision rev on.
func (s *Store) watchFrom(ctx context.Context, lo, hi []byte, rev int64) (<-chan struct{}, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	stop := context.AfterFunc(s.ctx, cancel) // the store's Close ends the watch
	wch := s.c.Watch(wctx, s.key(lo), clientv3.WithRange(s.key(hi)), clientv3.WithRev(rev))
	out := make(chan struct{}, 1)
	go func() {
		defer s.exit()
		defer close(out)
		defer stop()
		defer cancel()
		for {
			select {
			case resp, ok := <-wch:
				if !ok || resp.Canceled || resp.CompactRevision != 0 || resp.Err() != nil {
					return
				}
				if len(resp.Events) == 0 {
					continue // a progress notification or the creation
				}
				select {
				case out <- struct{}{}:
				default: // a wake-up is pending already
				}
			case <-wctx.Done():
				return
			}
		}
	}()
	return out, nil
}
