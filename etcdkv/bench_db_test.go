package etcdkv_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/etcdkv/etcdtest"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// tipkv on etcd against raw clientv3 doing the same work, interleaved in
// one run on the test cluster (3 members on loopback, fsync on): the
// figures the etcd backend is held to (etcdkv/README.md, BENCHMARKS.md).
//
//	go test -run '^$' -bench DB -benchtime 2000x ./
//
// The raw side writes the same keys and values with the same compares
// that tipkv sends, so the ratio is what versioned/ and queue/ add on top
// of the etcd client.
func BenchmarkDB(b *testing.B) {
	b.Run("op=put", benchDBPut)
	b.Run("op=latest,versions=100", benchDBLatest)
	b.Run("op=enqueue,batch=100", benchDBEnqueue)
	b.Run("op=queue,producers=2,consumers=2,batch=10", func(b *testing.B) { benchDBQueue2x2(b, 10) })
	b.Run("op=queue,producers=2,consumers=2,batch=100", func(b *testing.B) { benchDBQueue2x2(b, 100) })
	b.Run("op=outbox,ops=1000", benchDBOutbox)
}

// openDB opens a DB on a fresh namespace of the endpoints' cluster.
func openDB(b *testing.B, endpoints []string, ns string, cfg etcdkv.Config) *tipkv.DB {
	b.Helper()
	cfg.Endpoints, cfg.Namespace = endpoints, ns
	db, err := etcdkv.Open(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// rawClient is a clientv3 client of its own (as tipkv's DB has its own).
func rawClient(b *testing.B, endpoints []string) *clientv3.Client {
	b.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

type benchDoc struct {
	Name  string `msgpack:"name"`
	Count int    `msgpack:"count"`
	Note  string `msgpack:"note"`
}

var benchValue = benchDoc{Name: "tea", Count: 2, Note: string(bytes.Repeat([]byte("n"), 80))}

// Collection.Put of the next version of one document (shared mode: one txn
// guarded by the version it follows) against a raw txn of one put guarded
// by the same two compares (the previous version stored, this one not).
func benchDBPut(b *testing.B) {
	eps := etcdkv.ClusterForTest().Endpoints()
	ns := etcdkv.NamespaceForTest(b)
	db := openDB(b, eps, ns, etcdkv.Config{})
	c := rawClient(b, eps)
	docs, err := versioned.NewCollection[benchDoc](db, "docs", nil)
	if err != nil {
		b.Fatal(err)
	}
	val, err := codec.Msgpack[benchDoc]{}.Append(nil, benchValue)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	raw := func(i int64) error {
		prev, cur := ns+"raw/"+strconv.FormatInt(i, 10), ns+"raw/"+strconv.FormatInt(i+1, 10)
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(prev), ">", 0),
			clientv3.Compare(clientv3.CreateRevision(cur), "=", 0),
		}
		if i == 0 {
			cmps = cmps[1:]
		}
		resp, err := c.Txn(ctx).If(cmps...).Then(clientv3.OpPut(cur, string(val))).Commit()
		if err == nil && !resp.Succeeded {
			err = fmt.Errorf("raw put %d: condition failed", i+1)
		}
		return err
	}
	store := func(i int64) error {
		v, err := docs.Put(db, "order-1", benchValue)
		if err == nil && v != i+1 {
			err = fmt.Errorf("put wrote version %d, want %d", v, i+1)
		}
		return err
	}
	pair(b, raw, store)
}

// Collection.Latest of a document of 100 versions against a raw range
// read of limit 1 over the document's keys.
func benchDBLatest(b *testing.B) {
	eps := etcdkv.ClusterForTest().Endpoints()
	ns := etcdkv.NamespaceForTest(b)
	db := openDB(b, eps, ns, etcdkv.Config{})
	c := rawClient(b, eps)
	docs, err := versioned.NewCollection[benchDoc](db, "docs", nil)
	if err != nil {
		b.Fatal(err)
	}
	for range 100 {
		if _, err := docs.Put(db, "order-1", benchValue); err != nil {
			b.Fatal(err)
		}
	}
	// The document's keys: collection "docs", id "order-1" (the layout
	// in the root doc.go), newest version first.
	pre := ns + string(codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "docs"), "order-1"))
	end := ns + string(codec.PrefixEnd([]byte(pre[len(ns):])))
	ctx := context.Background()
	raw := func(int64) error {
		resp, err := c.Get(ctx, pre, clientv3.WithRange(end), clientv3.WithLimit(1))
		if err == nil && len(resp.Kvs) != 1 {
			err = fmt.Errorf("raw latest: %d keys", len(resp.Kvs))
		}
		return err
	}
	store := func(int64) error {
		d, err := docs.Latest("order-1")
		if err == nil && d.Version != 100 {
			err = fmt.Errorf("latest is version %d, want 100", d.Version)
		}
		return err
	}
	pair(b, raw, store)
}

// An Update enqueueing 100 messages (queue.Enqueue in shared mode: a read
// of the queue's state key, then one txn of 100 item puts and the state
// key, on condition that it still holds what was read) against raw
// clientv3 doing the same: a get of a tail key, a txn comparing it and
// putting 100 items and the tail.
func benchDBEnqueue(b *testing.B) {
	const batch = 100
	eps := etcdkv.ClusterForTest().Endpoints()
	ns := etcdkv.NamespaceForTest(b)
	db := openDB(b, eps, ns, etcdkv.Config{})
	c := rawClient(b, eps)
	q, err := queue.Open[benchDoc](db, "jobs", nil)
	if err != nil {
		b.Fatal(err)
	}
	val, err := codec.Msgpack[benchDoc]{}.Append(nil, benchValue)
	if err != nil {
		b.Fatal(err)
	}
	items := make([]benchDoc, batch)
	for i := range items {
		items[i] = benchValue
	}
	ctx := context.Background()
	tail := ns + "raw/tail"
	if _, err := c.Put(ctx, tail, "0"); err != nil {
		b.Fatal(err)
	}
	ops := make([]clientv3.Op, batch+1)
	raw := func(int64) error {
		resp, err := c.Get(ctx, tail)
		if err != nil {
			return err
		}
		old := string(resp.Kvs[0].Value)
		n, _ := strconv.ParseInt(old, 10, 64)
		for j := range batch {
			ops[j] = clientv3.OpPut(fmt.Sprintf("%sraw/item/%016d", ns, n+int64(j)), string(val))
		}
		ops[batch] = clientv3.OpPut(tail, strconv.FormatInt(n+batch, 10))
		tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Value(tail), "=", old)).Then(ops...).Commit()
		if err == nil && !tr.Succeeded {
			err = fmt.Errorf("raw enqueue: condition failed")
		}
		return err
	}
	store := func(int64) error { _, err := q.Enqueue(db, items...); return err }
	rawD, storeD := pair(b, raw, store)
	b.ReportMetric(batch/rawD.Seconds(), "raw-msg/s")
	b.ReportMetric(batch/storeD.Seconds(), "msg/s")
}

// Two producers and two consumers, each a DB of its own (with its own
// etcd client, as separate processes would have): producers enqueue b.N
// messages in Updates of batch, consumers receive up to batch at a time
// and acknowledge them in one Ack. The figure is messages through the
// queue per second, from the first enqueue to the last Ack.
func benchDBQueue2x2(b *testing.B, batch int) {
	eps := etcdkv.ClusterForTest().Endpoints()
	ns := etcdkv.NamespaceForTest(b)
	type handle struct {
		db *tipkv.DB
		q  *queue.Queue[benchDoc]
	}
	open := func() handle {
		db := openDB(b, eps, ns, etcdkv.Config{})
		q, err := queue.Open[benchDoc](db, "jobs", nil)
		if err != nil {
			b.Fatal(err)
		}
		return handle{db, q}
	}
	producers := []handle{open(), open()}
	consumers := []handle{open(), open()}
	items := make([]benchDoc, batch)
	for i := range items {
		items[i] = benchValue
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var toSend, received atomic.Int64
	toSend.Store(int64(b.N))
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, h := range producers {
		wg.Go(func() {
			for {
				n := min(toSend.Add(-int64(batch))+int64(batch), int64(batch))
				if n <= 0 {
					return
				}
				if _, err := h.q.Enqueue(h.db, items[:n]...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for _, h := range consumers {
		wg.Go(func() {
			for ctx.Err() == nil {
				ms, err := h.q.ReceiveWait(ctx, batch, time.Minute)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				ids := make([]queue.ID, len(ms))
				for i, m := range ms {
					ids[i] = m.ID
				}
				if err := h.q.Ack(h.db, ids...); err != nil {
					errs <- err
					return
				}
				if received.Add(int64(len(ms))) >= int64(b.N) {
					cancel()
				}
			}
		})
	}
	select {
	case <-ctx.Done():
	case err := <-errs:
		cancel()
		wg.Wait()
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	wg.Wait()
	b.StopTimer()
	if got := received.Load(); got != int64(b.N) {
		b.Fatalf("received %d messages, want %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
}

// The outbox: one Update that writes a document version and enqueues 999
// messages, 1,001 writes in one txn. etcd takes at most --max-txn-ops
// writes in a txn (128 by default), and tipkv does not split an Update
// (it would no longer be atomic): such an Update fails with ErrInvalid and
// writes nothing (TestUpdateOverTxnLimit). This benchmark runs a cluster
// of its own started with --max-txn-ops 2048, and pairs the Update with a
// raw txn of the same compares and puts.
func benchDBOutbox(b *testing.B) {
	const msgs = 999
	cl, err := etcdtest.Start(etcdtest.Options{MaxTxnOps: 2048})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	eps := cl.Endpoints()
	ns := "/bench/outbox/"
	db := openDB(b, eps, ns, etcdkv.Config{MaxTxnOps: 2048})
	c := rawClient(b, eps)
	docs, err := versioned.NewCollection[benchDoc](db, "orders", nil)
	if err != nil {
		b.Fatal(err)
	}
	q, err := queue.Open[benchDoc](db, "outbox", nil)
	if err != nil {
		b.Fatal(err)
	}
	val, err := codec.Msgpack[benchDoc]{}.Append(nil, benchValue)
	if err != nil {
		b.Fatal(err)
	}
	items := make([]benchDoc, msgs)
	for i := range items {
		items[i] = benchValue
	}
	ctx := context.Background()
	tail := ns + "raw/tail"
	if _, err := c.Put(ctx, tail, "0"); err != nil {
		b.Fatal(err)
	}
	ops := make([]clientv3.Op, msgs+2)
	raw := func(i int64) error {
		resp, err := c.Get(ctx, tail)
		if err != nil {
			return err
		}
		old := string(resp.Kvs[0].Value)
		n, _ := strconv.ParseInt(old, 10, 64)
		prev, cur := ns+"raw/doc/"+strconv.FormatInt(i, 10), ns+"raw/doc/"+strconv.FormatInt(i+1, 10)
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.Value(tail), "=", old),
			clientv3.Compare(clientv3.CreateRevision(cur), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(prev), ">", 0),
		}
		if i == 0 {
			cmps = cmps[:2]
		}
		for j := range msgs {
			ops[j] = clientv3.OpPut(fmt.Sprintf("%sraw/item/%016d", ns, n+int64(j)), string(val))
		}
		ops[msgs] = clientv3.OpPut(tail, strconv.FormatInt(n+msgs, 10))
		ops[msgs+1] = clientv3.OpPut(cur, string(val))
		tr, err := c.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err == nil && !tr.Succeeded {
			err = fmt.Errorf("raw outbox: condition failed")
		}
		return err
	}
	store := func(int64) error {
		return db.Update(func(bt *tipkv.Batch) error {
			if _, err := docs.Put(bt, "order-1", benchValue); err != nil {
				return err
			}
			_, err := q.Enqueue(bt, items...)
			return err
		})
	}
	pair(b, raw, store)
}
