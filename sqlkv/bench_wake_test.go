package sqlkv_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/versioned"
)

// Cross-process wake-up on PostgreSQL (issue 28: p50 <= 10 ms, p99 <= 50
// ms for Follow, Watch and Wait):
//
//	cd sqlkv && go test -run '^$' -bench TipkvWake -benchtime 200x -count 3 .
//
// narrowFamilies is the old default of Config.NotifyFamilies, which the
// benchmarks pair with the new one.
var narrowFamilies = []codec.Family{codec.FamilyQueueState}

// wakeFloor is the least time the writer leaves a follower after it woke,
// to read, find nothing more and go back to sleep, before the next write.
const wakeFloor = 5 * time.Millisecond

// op=follow|watch|wait: two DBs on one table (two sqlkv.Open, two pools,
// as two processes): one is blocked in Feed.Follow, Collection.Watch or a
// queue's ReceiveWait, the other Appends, Puts or Enqueues one at a time;
// the time from the writer's call (its commit included) to the
// follower's iterator yielding (ReceiveWait returning) what it wrote.
// Each write comes a random time after the follower last woke (wakeFloor
// plus up to one PollInterval), so a polling follower is met at every
// phase of its poll, as a real writer would meet it. The default
// NotifyFamilies (p50-ms, p99-ms) and the old default, queue state alone
// (narrow-p50-ms, narrow-p99-ms), each on a table of its own, in
// interleaved chunks of the same run. commit-p50-ms and commit-p99-ms are
// the default side's writes alone (the call to its return), to tell a
// slow commit from a slow wake-up.
func BenchmarkTipkvWake(b *testing.B) {
	for _, op := range []string{"follow", "watch", "wait"} {
		b.Run("op="+op, func(b *testing.B) {
			var commits []time.Duration
			def := wakeRig(b, op, nil, &commits)
			narrow := wakeRig(b, op, narrowFamilies, nil)
			pairedAs(b, "narrow", def, narrow)
			slices.Sort(commits)
			pct := func(p float64) float64 { return float64(commits[int(p*float64(len(commits)-1))]) / 1e6 }
			b.ReportMetric(pct(0.5), "commit-p50-ms")
			b.ReportMetric(pct(0.99), "commit-p99-ms")
		})
	}
}

// wakeRig opens a writer and a follower for op on a new table with the
// given families (nil: the default) and returns one measured write. If
// commits is not nil, each write's own duration is appended to it.
func wakeRig(b *testing.B, op string, families []codec.Family, commits *[]time.Duration) func(i int) time.Duration {
	b.Helper()
	cfg := sqlkv.Config{DSN: dsn(b), Table: newTable(b), NotifyFamilies: families}
	open := func() *tipkv.DB {
		db, err := sqlkv.Open(context.Background(), cfg, &tipkv.Options{NoSync: true})
		require.NoError(b, err)
		b.Cleanup(func() { _ = db.Close() })
		return db
	}
	writer, follower := open(), open()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel) // before the DBs close
	woke := make(chan time.Time)
	wake := func() bool {
		select {
		case woke <- time.Now():
			return true
		case <-ctx.Done():
			return false
		}
	}
	var write func(i int) error
	switch op {
	case "follow":
		wf, err := versioned.NewFeed[benchDoc](writer, nil)
		require.NoError(b, err)
		ff, err := versioned.NewFeed[benchDoc](follower, nil)
		require.NoError(b, err)
		go func() {
			for _, err := range ff.Follow(ctx, "s", 0) {
				if err != nil || !wake() {
					return
				}
			}
		}()
		write = func(i int) error { _, err := wf.Append(writer, "s", benchDoc{N: i}); return err }
	case "watch":
		wd, err := versioned.NewCollection[benchDoc](writer, "docs", nil)
		require.NoError(b, err)
		fd, err := versioned.NewCollection[benchDoc](follower, "docs", nil)
		require.NoError(b, err)
		go func() {
			for _, err := range fd.Watch(ctx, "d", 0) {
				if err != nil || !wake() {
					return
				}
			}
		}()
		write = func(i int) error { _, err := wd.Put(writer, "d", benchDoc{N: i}); return err }
	case "wait":
		wq, err := queue.Open[benchDoc](writer, "jobs", nil)
		require.NoError(b, err)
		fq, err := queue.Open[benchDoc](follower, "jobs", nil)
		require.NoError(b, err)
		go func() {
			for {
				ms, err := fq.ReceiveWait(ctx, 1, time.Minute)
				if err != nil || len(ms) != 1 || !wake() {
					return
				}
				if err := fq.Ack(follower, ms[0].ID); err != nil {
					panic(err)
				}
			}
		}()
		write = func(i int) error { _, err := wq.Enqueue(writer, benchDoc{N: i}); return err }
	}
	poll := 100 * time.Millisecond // Config.PollInterval's default
	return func(i int) time.Duration {
		time.Sleep(wakeFloor + rand.N(poll))
		start := time.Now()
		if err := write(i); err != nil {
			b.Fatal(err)
		}
		if commits != nil {
			*commits = append(*commits, time.Since(start))
		}
		select {
		case t := <-woke:
			return t.Sub(start)
		case <-time.After(time.Minute):
			b.Fatalf("%s: not woken in a minute", op)
			return 0
		}
	}
}

// op=put,writers=4: what notifying costs writers. Four DBs (four pools,
// as four processes) each Put 10 versions of a document of its own,
// concurrently, while a fifth DB watches a document (so the table's
// channel has a listener); the figure is the wall time of the 40 Puts,
// with the default NotifyFamilies (every Put notifies) and with queue
// state alone (no Put notifies), each on a table of its own, in
// interleaved chunks of the same run. Puts per second: 40 / mean.
func BenchmarkTipkvNotifyCost(b *testing.B) {
	const writers, per = 4, 10
	rig := func(families []codec.Family) func(int) time.Duration {
		cfg := sqlkv.Config{DSN: dsn(b), Table: newTable(b), NotifyFamilies: families}
		var cols []*versioned.Collection[benchDoc]
		var dbs []*tipkv.DB
		for range writers + 1 {
			db, err := sqlkv.Open(context.Background(), cfg, &tipkv.Options{NoSync: true})
			require.NoError(b, err)
			b.Cleanup(func() { _ = db.Close() })
			c, err := versioned.NewCollection[benchDoc](db, "docs", nil)
			require.NoError(b, err)
			dbs, cols = append(dbs, db), append(cols, c)
		}
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		go func() {
			for range cols[writers].Watch(ctx, "watched", 0) {
			}
		}()
		return func(i int) time.Duration {
			var wg sync.WaitGroup
			start := time.Now()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range per {
						if _, err := cols[w].Put(dbs[w], fmt.Sprint("w", w), benchDoc{N: i*per + j}); err != nil {
							panic(err)
						}
					}
				}()
			}
			wg.Wait()
			return time.Since(start)
		}
	}
	pairedAs(b, "narrow", rig(nil), rig(narrowFamilies))
}
