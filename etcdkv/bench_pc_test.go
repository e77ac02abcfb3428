package etcdkv_test

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/etcdkv/etcdtest"
	"github.com/tipkv/tipkv/queue"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Two producers and two consumers on one queue on etcd (issue 28: >= 2,000
// msg/s), beside raw clientv3 doing the same by hand, in interleaved
// rounds of one run:
//
//	cd etcdkv && go test -run '^$' -bench TipkvProducersConsumers -benchtime 20x -count 3 .
//
// pcPerUpdate messages per Enqueue and up to pcPerReceive per ReceiveWait
// (acknowledged in one Ack), as sqlkv's benchmark of the same name;
// pcRound messages a round, half from each producer.
const pcPerUpdate, pcPerReceive, pcRound = 10, 100, 200

// handles=2|4: with 2, the producers share one DB and the consumers
// another (two etcdkv.Open, two clients: as a producing and a consuming
// process); with 4, each has its own. The consumers run throughout; one
// op is a round: the producers enqueue pcRound messages and the op ends
// when the consumers have acknowledged them all, so its time is first
// enqueue to last ack. msg/s and raw-msg/s are pcRound over the means;
// rpcs/msg and raw-rpcs/msg are the unary etcd requests each side sent
// per message (watches, which are streams, not counted), with the
// breakdown by method in the log. handles=2,fsync=off is handles=2 on a
// cluster of its own whose members do not fsync their logs: what the
// figures are without the disk's sync in every Raft commit.
//
// Raw, with as many clientv3 clients: a producer puts its 10 messages in
// one txn of 10 puts (keys ordered by a sequence of its own; no compare,
// as no tail is shared), a consumer reads the oldest 100 keys (a range of
// limit 100), and takes them with one txn deleting them on condition that
// each still has the revision it read (the loser of a race reads again);
// finding none, it watches the queue's range from the revision it read.
// That is a queue with no lease, no redelivery and no order across
// producers: the least etcd work that moves a message from one process to
// another, so the ratio is what tipkv's guarantees cost on top.
func BenchmarkTipkvProducersConsumers(b *testing.B) {
	for _, bc := range []struct {
		handles int
		fsync   bool
	}{{2, true}, {4, true}, {2, false}} {
		name := fmt.Sprintf("handles=%d", bc.handles)
		if !bc.fsync {
			name += ",fsync=off"
		}
		b.Run(name, func(b *testing.B) {
			eps := etcdkv.ClusterForTest().Endpoints()
			if !bc.fsync {
				cl, err := etcdtest.Start(etcdtest.Options{UnsafeNoFsync: true})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(cl.Close)
				eps = cl.Endpoints()
			}
			var tipRPCs, rawRPCs rpcCount
			tip, raw := tipkvPC(b, eps, bc.handles, &tipRPCs), rawPC(b, eps, bc.handles, &rawRPCs)
			tOp, tBase := pairedAs(b, "raw", tip, raw)
			b.ReportMetric(pcRound/(meanNs(tOp)/1e9), "msg/s")
			b.ReportMetric(pcRound/(meanNs(tBase)/1e9), "raw-msg/s")
			msgs := float64(pcRound * len(tOp))
			b.ReportMetric(float64(tipRPCs.total())/msgs, "rpcs/msg")
			b.ReportMetric(float64(rawRPCs.total())/msgs, "raw-rpcs/msg")
			b.Logf("tipkv RPCs per 100 messages: %s", tipRPCs.per(msgs/100))
			b.Logf("raw RPCs per 100 messages: %s", rawRPCs.per(msgs/100))
		})
	}
}

// pcRig runs two consumers until the benchmark ends and returns one
// measured round: the producers' enqueue (one call of produce per
// Update) and the wait until consumers report pcRound messages on acks.
func pcRig(b *testing.B, produce func(p int) error, consume func(ctx context.Context, c int, acks chan<- int) error) func(int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() }) // before the DBs and clients close
	acks := make(chan int, 1024)
	errs := make(chan error, 4)
	for c := range 2 {
		wg.Go(func() {
			if err := consume(ctx, c, acks); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	return func(int) time.Duration {
		start := time.Now()
		var pw sync.WaitGroup
		for p := range 2 {
			pw.Go(func() {
				for range pcRound / 2 / pcPerUpdate {
					if err := produce(p); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for got := 0; got < pcRound; {
			select {
			case n := <-acks:
				got += n
			case err := <-errs:
				b.Fatal(err)
			case <-time.After(time.Minute):
				b.Fatalf("a round: %d of %d messages acknowledged in a minute", got, pcRound)
			}
		}
		el := time.Since(start)
		pw.Wait()
		select {
		case n := <-acks:
			b.Fatalf("%d messages more than were sent", n)
		default:
		}
		return el
	}
}

// pcHandles returns the handle of producer p and of consumer c: with two
// handles the producers share 0 and the consumers 1; with four, 0-1 are
// the producers' and 2-3 the consumers'.
func pcHandles(handles int) (prod, cons func(int) int) {
	if handles == 2 {
		return func(int) int { return 0 }, func(int) int { return 1 }
	}
	return func(p int) int { return p }, func(c int) int { return 2 + c }
}

// tipkvPC is a round of queue.Enqueue and ReceiveWait+Ack on handles DBs
// on the cluster at eps.
func tipkvPC(b *testing.B, eps []string, handles int, rpcs *rpcCount) func(int) time.Duration {
	ns := etcdkv.NamespaceForTest(b)
	qs := make([]*queue.Queue[benchDoc], handles)
	dbs := make([]*tipkv.DB, handles)
	for i := range handles {
		dbs[i] = openDB(b, nil, ns, etcdkv.Config{Client: countedClient(b, eps, rpcs)})
		q, err := queue.Open[benchDoc](dbs[i], "work", nil)
		if err != nil {
			b.Fatal(err)
		}
		qs[i] = q
	}
	prod, cons := pcHandles(handles)
	msgs := make([]benchDoc, pcPerUpdate)
	for i := range msgs {
		msgs[i] = benchValue
	}
	return pcRig(b, func(p int) error {
		h := prod(p)
		_, err := qs[h].Enqueue(dbs[h], msgs...)
		return err
	}, func(ctx context.Context, c int, acks chan<- int) error {
		h := cons(c)
		for {
			ms, err := qs[h].ReceiveWait(ctx, pcPerReceive, time.Minute)
			if err != nil {
				return err
			}
			ids := make([]queue.ID, len(ms))
			for i, m := range ms {
				ids[i] = m.ID
			}
			if err := qs[h].Ack(dbs[h], ids...); err != nil {
				return err
			}
			acks <- len(ms)
		}
	})
}

// rawPC is the same round by hand on handles clientv3 clients (see
// BenchmarkTipkvProducersConsumers).
func rawPC(b *testing.B, eps []string, handles int, rpcs *rpcCount) func(int) time.Duration {
	pre := etcdkv.NamespaceForTest(b) + "raw/q/"
	end := string(codec.PrefixEnd([]byte(pre)))
	prod, cons := pcHandles(handles)
	cs := make([]*clientv3.Client, handles)
	for i := range cs {
		cs[i] = countedClient(b, eps, rpcs)
	}
	val, err := codec.Msgpack[benchDoc]{}.Append(nil, benchValue)
	if err != nil {
		b.Fatal(err)
	}
	var seq [2]int64 // each producer's own, touched by its goroutine alone
	ops := [2][]clientv3.Op{make([]clientv3.Op, pcPerUpdate), make([]clientv3.Op, pcPerUpdate)}
	return pcRig(b, func(p int) error {
		c := cs[prod(p)]
		seq[p]++
		for j := range pcPerUpdate {
			ops[p][j] = clientv3.OpPut(fmt.Sprintf("%s%016d/%d/%02d", pre, seq[p], p, j), string(val))
		}
		_, err := c.Txn(context.Background()).Then(ops[p]...).Commit()
		return err
	}, func(ctx context.Context, ci int, acks chan<- int) error {
		c := cs[cons(ci)]
		for {
			resp, err := c.Get(ctx, pre, clientv3.WithRange(end), clientv3.WithLimit(pcPerReceive))
			if err != nil {
				return err
			}
			if len(resp.Kvs) == 0 {
				if err := rawWaitChange(ctx, c, pre, end, resp.Header.Revision+1); err != nil {
					return err
				}
				continue
			}
			cmps := make([]clientv3.Cmp, len(resp.Kvs))
			dels := make([]clientv3.Op, len(resp.Kvs))
			for i, kv := range resp.Kvs {
				cmps[i] = clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)
				dels[i] = clientv3.OpDelete(string(kv.Key))
			}
			tr, err := c.Txn(ctx).If(cmps...).Then(dels...).Commit()
			if err != nil {
				return err
			}
			if tr.Succeeded {
				acks <- len(resp.Kvs)
			}
		}
	})
}

// rawWaitChange waits for a change to [lo, hi) at or after revision rev.
func rawWaitChange(ctx context.Context, c *clientv3.Client, lo, hi string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range c.Watch(wctx, lo, clientv3.WithRange(hi), clientv3.WithRev(rev)) {
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) > 0 {
			return nil
		}
	}
	return ctx.Err()
}

// rpcCount counts unary etcd requests by method. It is safe for
// concurrent use.
type rpcCount struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *rpcCount) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[method]++
}

func (c *rpcCount) total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t int64
	for _, n := range c.n {
		t += n
	}
	return t
}

// per is the counts divided by units, by method ("Txn 12.0 Range 3.0").
func (c *rpcCount) per(units float64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for m, n := range c.n {
		parts = append(parts, fmt.Sprintf("%s %.1f", path.Base(m), float64(n)/units))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// countedClient is rawClient with every unary request counted in c (each
// attempt, retries included).
func countedClient(b *testing.B, endpoints []string, c *rpcCount) *clientv3.Client {
	b.Helper()
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // not the canceled requests of the benchmark's end
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				c.add(method)
				return invoke(ctx, method, req, reply, cc, opts...)
			})},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cl.Close() })
	return cl
}
