package etcdkv_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cross-process wake-up on etcd (issue 28: p50 <= 10 ms, p99 <= 50 ms for
// Follow, Watch and Wait), beside raw clientv3's own put-to-watch-event
// latency in the same run:
//
//	cd etcdkv && go test -run '^$' -bench TipkvWake -benchtime 200x -count 3 .
//
// wakeFloor is the least time the writer leaves a follower after it woke,
// to read, find nothing more and go back to sleep, before the next write;
// wakeJitter is the most it adds at random, so writes do not fall in step
// with anything periodic. etcd pushes changes (a watch per follower), so
// nothing polls and the phase does not matter as it does on PostgreSQL.
const wakeFloor, wakeJitter = 5 * time.Millisecond, 10 * time.Millisecond

// op=follow|watch|wait: two DBs on one namespace (two etcdkv.Open, two
// clients, as two processes): one is blocked in Feed.Follow,
// Collection.Watch or a queue's ReceiveWait, the other Appends, Puts or
// Enqueues one at a time; the time from the writer's call (its commit
// included) to the follower's iterator yielding (ReceiveWait returning)
// what it wrote. Raw: one clientv3 client Puts a key, another has a watch
// open on it; the time from the Put call to the watch event arriving,
// which is etcd's floor for any follower in another process (a Raft
// commit, then the watch's delivery). commit-p50-ms and commit-p99-ms are
// tipkv's writes alone (the call to its return), to tell a slow commit
// from a slow wake-up; watch-p50-ms and watch-p99-ms are the writer's
// call to the follower's etcd watch firing (timedWatch), before the
// follower reads what changed and yields it.
func BenchmarkTipkvWake(b *testing.B) {
	for _, op := range []string{"follow", "watch", "wait"} {
		b.Run("op="+op, func(b *testing.B) {
			var commits, watches []time.Duration
			tip := wakeRig(b, op, &commits, &watches)
			raw := rawWakeRig(b)
			pairedAs(b, "raw", tip, raw)
			slices.Sort(commits)
			slices.Sort(watches)
			b.ReportMetric(pctMs(commits, 0.5), "commit-p50-ms")
			b.ReportMetric(pctMs(commits, 0.99), "commit-p99-ms")
			if len(watches) > 0 {
				b.ReportMetric(pctMs(watches, 0.5), "watch-p50-ms")
				b.ReportMetric(pctMs(watches, 0.99), "watch-p99-ms")
			}
		})
	}
}

// wakeRig opens a writer and a follower for op on a new namespace of the
// test cluster and returns one measured write; each write's own duration
// is appended to commits, and the time from its call to the follower's
// watch firing to watches.
func wakeRig(b *testing.B, op string, commits, watches *[]time.Duration) func(i int) time.Duration {
	b.Helper()
	eps := etcdkv.ClusterForTest().Endpoints()
	ns := etcdkv.NamespaceForTest(b)
	writer := openDB(b, eps, ns, etcdkv.Config{})
	fs, err := etcdkv.NewStore(context.Background(), etcdkv.Config{Endpoints: eps, Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	tw := &timedWatch{Store: fs}
	follower, err := tipkv.OpenEngine(tw, "etcd-follower", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = follower.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel) // before the DBs close
	woke := make(chan time.Time)
	wake := func(t time.Time) bool {
		select {
		case woke <- t:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var write func(i int) error
	switch op {
	case "follow":
		wf, err := versioned.NewFeed[benchDoc](writer, nil)
		if err != nil {
			b.Fatal(err)
		}
		ff, err := versioned.NewFeed[benchDoc](follower, nil)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for _, err := range ff.Follow(ctx, "s", 0) {
				if err != nil || !wake(time.Now()) {
					return
				}
			}
		}()
		write = func(i int) error { _, err := wf.Append(writer, "s", benchDoc{Count: i}); return err }
	case "watch":
		wd, err := versioned.NewCollection[benchDoc](writer, "docs", nil)
		if err != nil {
			b.Fatal(err)
		}
		fd, err := versioned.NewCollection[benchDoc](follower, "docs", nil)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for _, err := range fd.Watch(ctx, "d", 0) {
				if err != nil || !wake(time.Now()) {
					return
				}
			}
		}()
		write = func(i int) error { _, err := wd.Put(writer, "d", benchDoc{Count: i}); return err }
	case "wait":
		wq, err := queue.Open[benchDoc](writer, "jobs", nil)
		if err != nil {
			b.Fatal(err)
		}
		fq, err := queue.Open[benchDoc](follower, "jobs", nil)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for {
				ms, err := fq.ReceiveWait(ctx, 1, time.Minute)
				t := time.Now()
				if err != nil || len(ms) != 1 {
					return
				}
				// Ack before reporting, so the next write does not
				// race this consumer's own commit.
				if err := fq.Ack(follower, ms[0].ID); err != nil || !wake(t) {
					return
				}
			}
		}()
		write = func(i int) error { _, err := wq.Enqueue(writer, benchDoc{Count: i}); return err }
	}
	return func(i int) time.Duration {
		time.Sleep(wakeFloor + rand.N(wakeJitter))
		start := time.Now()
		if err := write(i); err != nil {
			b.Fatal(err)
		}
		*commits = append(*commits, time.Since(start))
		d := waitWoken(b, op, woke, start)
		if fired := tw.fired.Load(); fired > start.UnixNano() {
			*watches = append(*watches, time.Duration(fired-start.UnixNano()))
		}
		return d
	}
}

// timedWatch is an etcdkv.Store whose Watch notes when the etcd watch
// last fired (Unix ns), on its way to tipkv.
type timedWatch struct {
	*etcdkv.Store
	fired atomic.Int64
}

// Watch implements engine.Watcher, relaying the store's watch.
func (s *timedWatch) Watch(ctx context.Context, lo, hi []byte) (<-chan struct{}, error) {
	in, err := s.Store.Watch(ctx, lo, hi)
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range in {
			s.fired.Store(time.Now().UnixNano())
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, nil
}

// rawWakeRig: a clientv3 client watching a key from a goroutine, another
// putting it; one measured put.
func rawWakeRig(b *testing.B) func(i int) time.Duration {
	b.Helper()
	eps := etcdkv.ClusterForTest().Endpoints()
	key := etcdkv.NamespaceForTest(b) + "raw/k"
	writer, follower := rawClient(b, eps), rawClient(b, eps)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	woke := make(chan time.Time)
	wch := follower.Watch(clientv3.WithRequireLeader(ctx), key)
	go func() {
		for resp := range wch {
			t := time.Now()
			for range resp.Events {
				select {
				case woke <- t:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	// The watch is made asynchronously: wait until it delivers a put.
	if _, err := writer.Put(ctx, key, "ready"); err != nil {
		b.Fatal(err)
	}
	waitWoken(b, "raw", woke, time.Now())
	return func(int) time.Duration {
		time.Sleep(wakeFloor + rand.N(wakeJitter))
		start := time.Now()
		if _, err := writer.Put(ctx, key, string(benchValue.Note)); err != nil {
			b.Fatal(err)
		}
		return waitWoken(b, "raw", woke, start)
	}
}

// waitWoken returns the time from start to the follower's wake-up.
func waitWoken(b *testing.B, op string, woke <-chan time.Time, start time.Time) time.Duration {
	select {
	case t := <-woke:
		return t.Sub(start)
	case <-time.After(time.Minute):
		b.Fatalf("%s: not woken in a minute", op)
		return 0
	}
}
