package sqlkv_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/versioned"
)

// tipkv on PostgreSQL against the targets, each beside raw pgx
// doing the same work with the statements one would write by hand, in the
// same run, interleaved (see paired):
//
//	cd sqlkv && go test -run '^$' -bench Tipkv -benchtime 2000x -count 3 .
//
// The tests' own server (fsync off, loopback). Targets (issue 17): guarded
// Put p50 <= 1 ms; Latest p50 <= 0.3 ms; an outbox Update of 1,000 rows p50
// <= 15 ms; enqueue >= 1,000 msg/s at 1 per Update and >= 30,000 at 100;
// 2 producers + 2 consumers >= 3,000 msg/s; a cross-process Wait woken
// within 50 ms at p99.

// paired runs op and base in interleaved chunks, alternating which goes
// first, b.N calls of each in all, timing every call. It reports each
// side's p50 and p99 (ms), the ratio of the p50s (op/base) and, as its
// spread, the lowest and highest ratio of the per-chunk medians; ns/op
// and raw-ns/op are the means (a throughput is per / mean).
func paired(b *testing.B, op, base func(i int)) {
	b.Helper()
	pairedTimes(b, wall(op), wall(base))
}

// wall times each call of f.
func wall(f func(int)) func(int) time.Duration {
	return func(i int) time.Duration {
		start := time.Now()
		f(i)
		return time.Since(start)
	}
}

// pairedTimes is paired for calls that measure themselves: each returns
// the time it stands for.
func pairedTimes(b *testing.B, op, base func(i int) time.Duration) {
	b.Helper()
	pairedAs(b, "raw", op, base)
}

// pairedAs is pairedTimes with the base's metrics named after it
// ("<name>-p50-ms", ...) rather than raw pgx's.
func pairedAs(b *testing.B, name string, op, base func(i int) time.Duration) {
	b.Helper()
	const chunks = 10
	per := max(b.N/chunks, 1)
	var tOp, tBase []time.Duration
	var ratios []float64
	n := 0
	timed := func(f func(int) time.Duration, into *[]time.Duration) time.Duration {
		var ds []time.Duration
		for range per {
			ds = append(ds, f(n))
			n++
		}
		*into = append(*into, ds...)
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	b.ResetTimer()
	for c := range chunks {
		var a, z time.Duration
		if c%2 == 0 {
			a, z = timed(op, &tOp), timed(base, &tBase)
		} else {
			z, a = timed(base, &tBase), timed(op, &tOp)
		}
		ratios = append(ratios, float64(a)/float64(z))
	}
	b.StopTimer()
	slices.Sort(tOp)
	slices.Sort(tBase)
	slices.Sort(ratios)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	pct := func(ds []time.Duration, p float64) time.Duration { return ds[int(p*float64(len(ds)-1))] }
	mean := func(ds []time.Duration) float64 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return float64(sum.Nanoseconds()) / float64(len(ds))
	}
	b.ReportMetric(mean(tOp), "ns/op")
	b.ReportMetric(mean(tBase), name+"-ns/op")
	b.ReportMetric(ms(pct(tOp, 0.5)), "p50-ms")
	b.ReportMetric(ms(pct(tOp, 0.99)), "p99-ms")
	b.ReportMetric(ms(pct(tBase, 0.5)), name+"-p50-ms")
	b.ReportMetric(ms(pct(tBase, 0.99)), name+"-p99-ms")
	b.ReportMetric(float64(pct(tOp, 0.5))/float64(pct(tBase, 0.5)), "ratio")
	b.ReportMetric(ratios[0], "ratio-min")
	b.ReportMetric(ratios[len(ratios)-1], "ratio-max")
}

// benchDB opens a tipkv DB on a new table, and a raw pool of its own on
// the same server, with a table of the same shape for the raw side.
func benchDB(b *testing.B) (*tipkv.DB, *pgx.Conn, string) {
	b.Helper()
	db, err := sqlkv.Open(context.Background(), sqlkv.Config{DSN: dsn(b), Table: newTable(b)}, &tipkv.Options{NoSync: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn(b))
	require.NoError(b, err)
	b.Cleanup(func() { conn.Close(ctx) })
	raw := pgx.Identifier{newTable(b)}.Sanitize()
	_, err = conn.Exec(ctx, `CREATE TABLE `+raw+` (k bytea PRIMARY KEY, v bytea)`)
	require.NoError(b, err)
	return db, conn, raw
}

type benchDoc struct {
	Name string `msgpack:"name"`
	N    int    `msgpack:"n"`
}

// op=put: a new version of one document (the store checks the latest
// version present and the next absent, atomically with the write). Raw:
// the same guard by hand, one pipeline: the latest row locked FOR KEY
// SHARE, the next inserted (its primary key is the absent check).
func BenchmarkTipkvPut(b *testing.B) {
	db, conn, raw := benchDB(b)
	users, err := versioned.NewCollection[benchDoc](db, "users", nil)
	require.NoError(b, err)
	_, err = users.Put(db, "u1", benchDoc{Name: "a"})
	require.NoError(b, err)
	val := []byte(`{"name":"a document","n":1}`)
	ctx := context.Background()
	_, err = conn.Exec(ctx, `INSERT INTO `+raw+` VALUES ($1, $2)`, vkey("u1", 1), val)
	require.NoError(b, err)
	rv := int64(1)
	paired(b, func(i int) {
		if _, err := users.Put(db, "u1", benchDoc{Name: "a", N: i}); err != nil {
			b.Fatal(err)
		}
	}, func(int) {
		bt := &pgx.Batch{}
		bt.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
		bt.Queue(`SELECT 1/count(*) FROM (SELECT 1 FROM `+raw+` WHERE k = $1 FOR KEY SHARE) s`, vkey("u1", rv))
		bt.Queue(`INSERT INTO `+raw+` (k, v) VALUES ($1, $2)`, vkey("u1", rv+1), val)
		bt.Queue("COMMIT")
		if err := conn.SendBatch(ctx, bt).Close(); err != nil {
			b.Fatal(err)
		}
		rv++
	})
}

// op=latest: the newest version of a document of 20 versions. Raw: one
// SELECT ... ORDER BY k LIMIT 1, the least a read of it can send.
func BenchmarkTipkvLatest(b *testing.B) {
	db, conn, raw := benchDB(b)
	users, err := versioned.NewCollection[benchDoc](db, "users", nil)
	require.NoError(b, err)
	ctx := context.Background()
	for v := 1; v <= 20; v++ {
		_, err = users.Put(db, "u1", benchDoc{Name: "a", N: v})
		require.NoError(b, err)
		_, err = conn.Exec(ctx, `INSERT INTO `+raw+` VALUES ($1, $2)`, vkey("u1", int64(v)), []byte(fmt.Sprint(v)))
		require.NoError(b, err)
	}
	lo := doc("u1")
	hi := codec.PrefixEnd(lo)
	paired(b, func(int) {
		d, err := users.Latest("u1")
		if err != nil || d.Version != 20 {
			b.Fatal(d.Version, err)
		}
	}, func(int) {
		var k, v []byte
		if err := conn.QueryRow(ctx, `SELECT k, v FROM `+raw+` WHERE k >= $1 AND k < $2 ORDER BY k LIMIT 1`, lo, hi).Scan(&k, &v); err != nil {
			b.Fatal(err)
		}
	})
}

// op=outbox,rows=1000: one Update writes 500 new documents (orders) and
// enqueues their 500 events: 1,000 rows. Raw: one transaction, one
// pipeline, the 500 orders inserted in one statement, the 500 events in
// another, and the queue's tail moved by one compare-and-swap.
func BenchmarkTipkvOutbox(b *testing.B) {
	db, conn, raw := benchDB(b)
	orders, err := versioned.NewCollection[benchDoc](db, "orders", nil)
	require.NoError(b, err)
	outbox, err := queue.Open[benchDoc](db, "outbox", nil)
	require.NoError(b, err)
	ctx := context.Background()
	tail := stateKey("outbox")
	_, err = conn.Exec(ctx, `INSERT INTO `+raw+` VALUES ($1, $2)`, tail, []byte("0"))
	require.NoError(b, err)
	const n = 500
	next := 0
	paired(b, func(i int) {
		err := db.Update(func(bt *tipkv.Batch) error {
			events := make([]benchDoc, n)
			for j := range n {
				id := fmt.Sprintf("o-%d-%d", i, j)
				if _, err := orders.PutIf(bt, id, benchDoc{Name: id, N: j}, 0); err != nil {
					return err
				}
				events[j] = benchDoc{Name: id, N: 1}
			}
			_, err := outbox.Enqueue(bt, events...)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}, func(i int) {
		ks, vs := make([][]byte, n), make([][]byte, n)
		qs, qv := make([][]byte, n), make([][]byte, n)
		for j := range n {
			ks[j], vs[j] = vkey(fmt.Sprintf("o-%d-%d", i, j), 1), []byte(`{"name":"o","n":1}`)
			qs[j], qv[j] = qkey("outbox", int64(next+j)), []byte(`{"name":"o","n":1}`)
		}
		bt := &pgx.Batch{}
		bt.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
		bt.Queue(`SELECT 1/count(*) FROM (SELECT v FROM `+raw+` WHERE k = $1 FOR UPDATE) s WHERE s.v = $2`, tail, []byte(fmt.Sprint(next)))
		bt.Queue(`INSERT INTO `+raw+` (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])`, ks, vs)
		bt.Queue(`INSERT INTO `+raw+` (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])`, qs, qv)
		next += n
		bt.Queue(`UPDATE `+raw+` SET v = $2 WHERE k = $1`, tail, []byte(fmt.Sprint(next)))
		bt.Queue("COMMIT")
		if err := conn.SendBatch(ctx, bt).Close(); err != nil {
			b.Fatal(err)
		}
	})
}

// op=enqueue,per=1|100: messages enqueued to one queue, per Update. Raw:
// the queue's tail moved by compare-and-swap and the items inserted, in
// one pipeline. The figure is messages per second.
func BenchmarkTipkvEnqueue(b *testing.B) {
	for _, per := range []int{1, 100} {
		b.Run(fmt.Sprintf("per=%d", per), func(b *testing.B) {
			db, conn, raw := benchDB(b)
			q, err := queue.Open[benchDoc](db, "jobs", nil)
			require.NoError(b, err)
			ctx := context.Background()
			tail := stateKey("jobs")
			_, err = conn.Exec(ctx, `INSERT INTO `+raw+` VALUES ($1, $2)`, tail, []byte("0"))
			require.NoError(b, err)
			msgs := make([]benchDoc, per)
			next := 0
			paired(b, func(int) {
				if _, err := q.Enqueue(db, msgs...); err != nil {
					b.Fatal(err)
				}
			}, func(int) {
				qs, qv := make([][]byte, per), make([][]byte, per)
				for j := range per {
					qs[j], qv[j] = qkey("jobs", int64(next+j)), []byte(`{"name":"","n":0}`)
				}
				bt := &pgx.Batch{}
				bt.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
				bt.Queue(`SELECT 1/count(*) FROM (SELECT v FROM `+raw+` WHERE k = $1 FOR UPDATE) s WHERE s.v = $2`, tail, []byte(fmt.Sprint(next)))
				bt.Queue(`INSERT INTO `+raw+` (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])`, qs, qv)
				next += per
				bt.Queue(`UPDATE `+raw+` SET v = $2 WHERE k = $1`, tail, []byte(fmt.Sprint(next)))
				bt.Queue("COMMIT")
				if err := conn.SendBatch(ctx, bt).Close(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// op=2+2: two producers and two consumers, each a DB of its own (a pool
// and memory of its own, as a process), on one queue: producers enqueue
// 10 messages per Update, consumers receive up to 100 with ReceiveWait
// and acknowledge them in one Update. b.N messages in all; the figure is
// messages per second from the first enqueue to the last ack. Not paired:
// raw SQL has no queue of the same guarantees to compare with.
func BenchmarkTipkvProducersConsumers(b *testing.B) {
	cfg := sqlkv.Config{DSN: dsn(b), Table: newTable(b)}
	open := func() *tipkv.DB {
		db, err := sqlkv.Open(context.Background(), cfg, &tipkv.Options{NoSync: true})
		require.NoError(b, err)
		b.Cleanup(func() { _ = db.Close() })
		return db
	}
	const perUpdate = 10
	total := max(b.N/perUpdate, 2) * perUpdate
	var acked atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var dbs []*tipkv.DB
	for range 4 {
		dbs = append(dbs, open())
	}
	b.ResetTimer()
	start := time.Now()
	for p := range 2 {
		q, err := queue.Open[benchDoc](dbs[p], "work", nil)
		require.NoError(b, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := make([]benchDoc, perUpdate)
			for range total / perUpdate / 2 {
				if _, err := q.Enqueue(dbs[p], msgs...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for c := range 2 {
		db := dbs[2+c]
		q, err := queue.Open[benchDoc](db, "work", nil)
		require.NoError(b, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for acked.Load() < int64(total) {
				ms, err := q.ReceiveWait(ctx, 100, time.Minute)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				ids := make([]queue.ID, len(ms))
				for i, m := range ms {
					ids[i] = m.ID
				}
				if err := q.Ack(db, ids...); err != nil {
					errs <- err
					return
				}
				if acked.Add(int64(len(ms))) >= int64(total) {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	require.EqualValues(b, total, acked.Load())
	b.ReportMetric(float64(total)/el.Seconds(), "msg/s")
}

// op=wait: a consumer blocked in ReceiveWait on one DB, a producer
// enqueueing one message on another (another pool, as another process):
// the time from the producer's call to Enqueue (its commit included) to
// the consumer's ReceiveWait returning, one message at a time, each sent
// once the consumer is asleep. Raw: pg_notify committed on one
// connection, received by WaitForNotification on another.
func BenchmarkTipkvWait(b *testing.B) {
	cfg := sqlkv.Config{DSN: dsn(b), Table: newTable(b)}
	prod, err := sqlkv.Open(context.Background(), cfg, &tipkv.Options{NoSync: true})
	require.NoError(b, err)
	defer prod.Close()
	consStore, err := sqlkv.NewStore(context.Background(), cfg)
	require.NoError(b, err)
	cons, err := tipkv.OpenEngine(consStore, consStore.Name(), &tipkv.Options{NoSync: true})
	require.NoError(b, err)
	defer cons.Close()
	pq, err := queue.Open[benchDoc](prod, "wake", nil)
	require.NoError(b, err)
	cq, err := queue.Open[benchDoc](cons, "wake", nil)
	require.NoError(b, err)
	ctx := context.Background()
	lconn, err := pgx.Connect(ctx, dsn(b))
	require.NoError(b, err)
	defer lconn.Close(ctx)
	nconn, err := pgx.Connect(ctx, dsn(b))
	require.NoError(b, err)
	defer nconn.Close(ctx)
	_, err = lconn.Exec(ctx, "LISTEN bench_wake")
	require.NoError(b, err)

	got := make(chan time.Time)
	pairedTimes(b, func(int) time.Duration {
		for sqlkv.NotifyWatches(consStore) != 0 { // the last wait's watch is gone
			time.Sleep(50 * time.Microsecond) // waiting for the event, not for a time
		}
		go func() {
			ms, err := cq.ReceiveWait(ctx, 1, time.Minute)
			if err != nil || len(ms) != 1 {
				panic(fmt.Sprint(len(ms), err))
			}
			got <- time.Now()
			if err := cq.Ack(cons, ms[0].ID); err != nil {
				panic(err)
			}
		}()
		for sqlkv.NotifyWatches(consStore) == 0 { // the consumer watches
			time.Sleep(50 * time.Microsecond)
		}
		start := time.Now()
		if _, err := pq.Enqueue(prod, benchDoc{}); err != nil {
			b.Fatal(err)
		}
		return (<-got).Sub(start)
	}, func(int) time.Duration {
		go func() {
			if _, err := lconn.WaitForNotification(ctx); err != nil {
				panic(err)
			}
			got <- time.Now()
		}()
		start := time.Now()
		if _, err := nconn.Exec(ctx, "SELECT pg_notify('bench_wake', 'x')"); err != nil {
			b.Fatal(err)
		}
		return (<-got).Sub(start)
	})
}

// op=hot-document: 3 handles (as 3 processes) x 8 goroutines each Put one
// document, one Put per writer per round; a round's time over its 24
// writes is one op. Writers that collide queue on the document's lock
// (engine.Locker) and writers that have not collided give way to it
// (engine.LockHolding). Raw: 24 connections each making the same guarded
// insert of the next version by hand, the latest row locked FOR UPDATE
// first, so the row lock orders them (pessimistic, nothing to retry).
func BenchmarkTipkvHotDocument(b *testing.B) {
	const procs, writers = 3, 8
	cfg := sqlkv.Config{DSN: dsn(b), Table: newTable(b)}
	var docs []*versioned.Collection[benchDoc]
	var dbs []*tipkv.DB
	for range procs {
		db, err := sqlkv.Open(context.Background(), cfg, &tipkv.Options{NoSync: true})
		require.NoError(b, err)
		b.Cleanup(func() { _ = db.Close() })
		c, err := versioned.NewCollection[benchDoc](db, "docs", nil)
		require.NoError(b, err)
		docs, dbs = append(docs, c), append(dbs, db)
	}
	ctx := context.Background()
	raw := pgx.Identifier{newTable(b)}.Sanitize()
	var conns []*pgx.Conn
	for range procs * writers {
		conn, err := pgx.Connect(ctx, dsn(b))
		require.NoError(b, err)
		b.Cleanup(func() { conn.Close(ctx) })
		conns = append(conns, conn)
	}
	_, err := conns[0].Exec(ctx, `CREATE TABLE `+raw+` (k bytea PRIMARY KEY, v bytea)`)
	require.NoError(b, err)
	_, err = conns[0].Exec(ctx, `INSERT INTO `+raw+` VALUES ($1, $2)`, []byte("latest"), []byte{0, 0, 0, 0, 0, 0, 0, 0})
	require.NoError(b, err)
	val := []byte(`{"name":"a document","n":1}`)

	round := func(write func(w int) error) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, procs*writers)
		for w := range procs * writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := write(w); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return time.Since(start) / (procs * writers)
	}
	pairedTimes(b, func(i int) time.Duration {
		return round(func(w int) error {
			_, err := docs[w%procs].Put(dbs[w%procs], "hot", benchDoc{Name: "a", N: i})
			return err
		})
	}, func(int) time.Duration {
		return round(func(w int) error {
			tx, err := conns[w].BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			var latest []byte
			if err := tx.QueryRow(ctx, `SELECT v FROM `+raw+` WHERE k = 'latest' FOR UPDATE`).Scan(&latest); err != nil {
				return err
			}
			next := binary.BigEndian.Uint64(latest) + 1
			nb := binary.BigEndian.AppendUint64(nil, next)
			if _, err := tx.Exec(ctx, `INSERT INTO `+raw+` (k, v) VALUES ($1, $2)`, vkey("hot", int64(next)), val); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE `+raw+` SET v = $1 WHERE k = 'latest'`, nb); err != nil {
				return err
			}
			return tx.Commit(ctx)
		})
	})
	v, err := docs[0].Latest("hot")
	require.NoError(b, err)
	b.ReportMetric(float64(v.Version)/float64(b.N*procs*writers), "versions/write")
}
