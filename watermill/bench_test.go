package tipkvwatermill_test

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for watermill-sql
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/sqlkv/pgtest"
	tipkvwatermill "github.com/tipkv/tipkv/watermill"
)

// The target: publish 10,000 messages from 20 goroutines, then
// drain them with one subscriber (one consumer group, each message
// acknowledged), tipkv on Pebble on disk (synced commits, as by default)
// against watermill-sql v4 on PostgreSQL (the server SQLKV_DSN names,
// synchronous_commit as the server has it: on by default), and tipkv
// with BatchSize 1: one Receive and one acknowledgement write per
// message, what draining cost before batches.
//
// Every round runs each system once, on a topic of its own, in an order
// that rotates from round to round (as bench/paired.go does), so that
// load on the machine falls on every side alike. Times are wall-clock:
// the work is synced commits and, for watermill-sql, a server in another
// process, which the process's CPU clock (the core module's internal/paired) would
// not see. Reported per message, for publishing and for draining:
//
//	<system>-publish-ns/msg, <system>-drain-ns/msg  the mean over the rounds
//	drain-ratio-<system>   tipkv's drain over <system>'s: the geometric mean
//	                       of the per-round ratios; -min and -max beside it
//	publish-ratio-<system> the same for publishing
//
// Run with -benchtime Nx for N rounds (the figures in README.md: 6x).
func BenchmarkDrain(b *testing.B) {
	const msgs, publishers = 10_000, 20
	// Not pgtest's own server: it runs with fsync off, which would flatter
	// watermill-sql against tipkv's synced commits.
	dsn := os.Getenv(pgtest.DSNEnv)
	if dsn == "" {
		b.Skipf("needs a PostgreSQL server with fsync on for watermill-sql: set %s", pgtest.DSNEnv)
	}
	db, err := tipkv.Open(b.TempDir(), nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	pg, err := stdsql.Open("pgx", dsn)
	require.NoError(b, err)
	b.Cleanup(func() { _ = pg.Close() })

	run := fmt.Sprint(time.Now().UnixNano())
	systems := []struct {
		name string
		pair func(topic string) (message.Publisher, message.Subscriber, error)
	}{
		{"tipkv", func(string) (message.Publisher, message.Subscriber, error) { return tipkvPair(db, 0) }},
		{"sql", func(string) (message.Publisher, message.Subscriber, error) { return sqlPair(pg) }},
		{"tipkv-batch1", func(string) (message.Publisher, message.Subscriber, error) { return tipkvPair(db, 1) }},
	}
	publish := map[string][]float64{}
	drain := map[string][]float64{}
	b.ResetTimer()
	for round := range b.N {
		for k := range systems {
			sys := systems[(round+k)%len(systems)]
			topic := fmt.Sprintf("bench_%s_%d_%s", run, round, sys.name)
			pub, sub, err := sys.pair(topic)
			require.NoError(b, err)
			if si, ok := sub.(message.SubscribeInitializer); ok {
				require.NoError(b, si.SubscribeInitialize(topic))
			}
			p, d := drainOnce(b, pub, sub, topic, msgs, publishers)
			require.NoError(b, sub.Close())
			require.NoError(b, pub.Close())
			publish[sys.name] = append(publish[sys.name], p.Seconds()*1e9/msgs)
			drain[sys.name] = append(drain[sys.name], d.Seconds()*1e9/msgs)
		}
	}
	b.StopTimer()
	for _, sys := range systems {
		b.ReportMetric(mean(publish[sys.name]), sys.name+"-publish-ns/msg")
		b.ReportMetric(mean(drain[sys.name]), sys.name+"-drain-ns/msg")
	}
	for _, sys := range systems[1:] {
		for what, m := range map[string]map[string][]float64{"publish": publish, "drain": drain} {
			gm, lo, hi := ratios(m["tipkv"], m[sys.name])
			b.ReportMetric(gm, what+"-ratio-"+sys.name)
			b.ReportMetric(lo, what+"-ratio-"+sys.name+"-min")
			b.ReportMetric(hi, what+"-ratio-"+sys.name+"-max")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// drainOnce publishes msgs messages from publishers goroutines, one
// message per Publish, then reads them all from a new subscription,
// acknowledging each, and returns the two times. It checks that every
// message arrived.
func drainOnce(b *testing.B, pub message.Publisher, sub message.Subscriber, topic string, msgs, publishers int) (time.Duration, time.Duration) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	for g := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < msgs; i += publishers {
				payload := fmt.Appendf(nil, `{"n":%d}`, i) // JSON: watermill-sql's default column type
				if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), payload)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.NoError(b, <-errs)
	published := time.Since(start)

	start = time.Now()
	ch, err := sub.Subscribe(context.Background(), topic)
	require.NoError(b, err)
	seen := make(map[string]bool, msgs)
	timeout := time.After(10 * time.Minute)
	for len(seen) < msgs {
		select {
		case m := <-ch:
			seen[m.UUID] = true
			m.Ack()
		case <-timeout:
			b.Fatalf("drained %d of %d messages", len(seen), msgs)
		}
	}
	return published, time.Since(start)
}

func tipkvPair(db *tipkv.DB, batch int) (message.Publisher, message.Subscriber, error) {
	pub, err := tipkvwatermill.NewPublisher(db, tipkvwatermill.PublisherConfig{})
	if err != nil {
		return nil, nil, err
	}
	sub, err := tipkvwatermill.NewSubscriber(db, tipkvwatermill.SubscriberConfig{ConsumerGroup: "bench", BatchSize: batch})
	return pub, sub, err
}

// sqlPair is watermill-sql's documented PostgreSQL setup: the default
// schema (batches of 100 rows per read), offsets per consumer group.
func sqlPair(pg *stdsql.DB) (message.Publisher, message.Subscriber, error) {
	beginner := wmsql.BeginnerFromStdSQL(pg)
	pub, err := wmsql.NewPublisher(beginner, wmsql.PublisherConfig{
		SchemaAdapter:        wmsql.DefaultPostgreSQLSchema{},
		AutoInitializeSchema: true,
	}, watermill.NopLogger{})
	if err != nil {
		return nil, nil, err
	}
	sub, err := wmsql.NewSubscriber(beginner, wmsql.SubscriberConfig{
		ConsumerGroup:    "bench",
		SchemaAdapter:    wmsql.DefaultPostgreSQLSchema{},
		OffsetsAdapter:   wmsql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true,
	}, watermill.NopLogger{})
	return pub, sub, err
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// ratios returns the geometric mean of the per-round ratios a[i]/z[i],
// and the least and greatest of them.
func ratios(a, z []float64) (gm, lo, hi float64) {
	rs := make([]float64, len(a))
	logs := 0.0
	for i := range a {
		rs[i] = a[i] / z[i]
		logs += math.Log(rs[i])
	}
	return math.Exp(logs / float64(len(rs))), slices.Min(rs), slices.Max(rs)
}
