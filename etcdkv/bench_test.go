package etcdkv_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/etcdkv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The store against raw clientv3 doing the same work, interleaved in one
// run on the test cluster (3 members on loopback, fsync on), so the figure
// that matters is the ratio: what the store adds over the etcd client. The
// tipkv-level figures build on this floor.
//
//	go test -run '^$' -bench . -benchtime 2000x ./
func BenchmarkStore(b *testing.B) {
	b.Run("op=put-guarded", benchGuardedPut)
	b.Run("op=latest,versions=100", benchLatest)
}

func bvkey(id string, v int64) []byte { return codec.AppendDesc(bvprefix(id), v) }

func bvprefix(id string) []byte {
	return codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "bench"), id)
}

// pair times one raw op and one store op per iteration, reports both
// p50s and their ratio, and returns the p50s.
func pair(b *testing.B, raw, store func(i int64) error) (rawP50, storeP50 time.Duration) {
	var rawD, storeD []time.Duration
	b.ResetTimer()
	for i := range int64(b.N) {
		t0 := time.Now()
		if err := raw(i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := store(i); err != nil {
			b.Fatal(err)
		}
		rawD, storeD = append(rawD, t1.Sub(t0)), append(storeD, time.Since(t1))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	r, s := p50(rawD), p50(storeD)
	b.ReportMetric(float64(r)/1e6, "raw-p50-ms")
	b.ReportMetric(float64(s)/1e6, "store-p50-ms")
	b.ReportMetric(float64(s)/float64(r), "ratio")
	return r, s
}

// A guarded put, as versioned/ sends one in shared mode: version v of a
// document, on condition that v-1 is stored and v is not.
func benchGuardedPut(b *testing.B) {
	s := etcdkv.OpenForTest(b, etcdkv.Config{})
	c, ns := s.Client(), s.Namespace()
	ctx := context.Background()
	val := bytes.Repeat([]byte("v"), 100)
	first := func(id string) {
		if err := apply(b, s, func(bt engine.Batch) { _ = bt.Set(bvkey(id, 0), val) }); err != nil {
			b.Fatal(err)
		}
	}
	first("raw")
	first("store")
	raw := func(i int64) error {
		prev, cur := ns+string(bvkey("raw", i)), ns+string(bvkey("raw", i+1))
		resp, err := c.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(prev), ">", 0),
			clientv3.Compare(clientv3.CreateRevision(cur), "=", 0),
		).Then(clientv3.OpPut(cur, string(val))).Commit()
		if err == nil && !resp.Succeeded {
			err = fmt.Errorf("raw put %d: condition failed", i+1)
		}
		return err
	}
	store := func(i int64) error {
		bt := s.NewBatch()
		defer bt.Close()
		_ = bt.Require(engine.Present(bvkey("store", i)))
		_ = bt.Require(engine.Absent(bvkey("store", i+1)))
		_ = bt.Set(bvkey("store", i+1), val)
		return bt.Apply(true)
	}
	pair(b, raw, store)
}

// The newest version of a document of 100: one bounded range of limit 1.
func benchLatest(b *testing.B) {
	s := etcdkv.OpenForTest(b, etcdkv.Config{})
	c, ns := s.Client(), s.Namespace()
	ctx := context.Background()
	if err := apply(b, s, func(bt engine.Batch) {
		for v := range int64(100) {
			_ = bt.Set(bvkey("doc", v+1), []byte(fmt.Sprint(v+1)))
		}
	}); err != nil {
		b.Fatal(err)
	}
	pre := bvprefix("doc")
	end := codec.PrefixEnd(pre)
	raw := func(int64) error {
		resp, err := c.Get(ctx, ns+string(pre), clientv3.WithRange(ns+string(end)), clientv3.WithLimit(1))
		if err == nil && (len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "100") {
			err = fmt.Errorf("raw latest: %v", resp.Kvs)
		}
		return err
	}
	store := func(int64) error {
		it, err := s.NewIter(pre, end)
		if err != nil {
			return err
		}
		defer it.Close()
		if !it.SeekPrefixGE(pre) {
			return fmt.Errorf("store latest: nothing (%v)", it.Error())
		}
		v, err := it.Value()
		if err == nil && string(v) != "100" {
			err = fmt.Errorf("store latest: %q", v)
		}
		return err
	}
	pair(b, raw, store)
}
