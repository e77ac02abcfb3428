// Command outbox runs tipkv's documents, a queue and the transactional
// outbox on a PostgreSQL database that you give it; it starts nothing
// itself. A producer creates orders (documents) and, in the same Update,
// enqueues an OrderPlaced event for each; a relay on a second DB handle
// (a pool and memory of its own, as another process would have) receives
// the events, "publishes" them, marks each order published (a new version
// of the document) and acknowledges the events in one Update. At the end
// it prints what it did and checks that every event came exactly once.
//
//	TIPKV_DSN='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' go run ./examples/outbox
//	go run ./examples/outbox -dsn 'host=127.0.0.1 user=postgres dbname=postgres sslmode=disable' -d 5s
//
// It writes to the table -table (default tipkv_example, created if
// missing) and leaves it there: run it again, or with -relays 2 in two
// shells at once, and the orders go on where they were.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/versioned"
)

// Order is the document: every change to an order is a new version.
type Order struct {
	ID        string  `msgpack:"id"`
	Total     float64 `msgpack:"total"`
	Status    string  `msgpack:"status"`
	Published bool    `msgpack:"published"`
}

// OrderPlaced is the event the outside world hears about.
type OrderPlaced struct {
	OrderID string  `msgpack:"order"`
	Version int64   `msgpack:"version"`
	Total   float64 `msgpack:"total"`
}

type config struct {
	dsn, table string
	duration   time.Duration
	batch      int
}

func main() {
	var cfg config
	flag.StringVar(&cfg.dsn, "dsn", os.Getenv("TIPKV_DSN"), "PostgreSQL connection string (default: $TIPKV_DSN)")
	flag.StringVar(&cfg.table, "table", "tipkv_example", "the table to use (created if missing)")
	flag.DurationVar(&cfg.duration, "d", 3*time.Second, "how long the producer runs")
	flag.IntVar(&cfg.batch, "batch", 100, "orders per Update, events per Receive")
	flag.Parse()
	if cfg.dsn == "" {
		log.Fatal("no database: give -dsn or set TIPKV_DSN")
	}
	if err := run(cfg); err != nil {
		log.Fatal(err)
	}
}

func run(cfg config) error {
	ctx := context.Background()
	open := func() (*tipkv.DB, *versioned.Collection[Order], *queue.Queue[OrderPlaced], error) {
		db, err := sqlkv.Open(ctx, sqlkv.Config{DSN: cfg.dsn, Table: cfg.table}, nil)
		if err != nil {
			return nil, nil, nil, err
		}
		orders, err := versioned.NewCollection[Order](db, "orders", nil)
		if err != nil {
			_ = db.Close()
			return nil, nil, nil, err
		}
		outbox, err := queue.Open[OrderPlaced](db, "outbox", nil)
		if err != nil {
			_ = db.Close()
			return nil, nil, nil, err
		}
		return db, orders, outbox, nil
	}
	db, orders, outbox, err := open()
	if err != nil {
		return err
	}
	defer db.Close()
	relayDB, relayOrders, relayOutbox, err := open()
	if err != nil {
		return err
	}
	defer relayDB.Close()

	// The relay: receive, publish, mark published, acknowledge.
	producing, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu        sync.Mutex
		published = map[string]int{}
		latencies []time.Duration
		relayErr  error
		wg        sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		relayErr = relay(producing, relayDB, relayOrders, relayOutbox, cfg.batch, func(m queue.Message[OrderPlaced]) {
			mu.Lock()
			defer mu.Unlock()
			published[m.Value.OrderID]++
			latencies = append(latencies, time.Since(m.Enqueued))
		})
	}()

	// The producer: each Update creates a batch of orders (PutIf with 0:
	// the order must not exist, which a shared engine checks without a
	// read) and enqueues their events; both land, or neither does.
	run := time.Now().UnixNano()
	start := time.Now()
	created := 0
	var prodErr error
	for time.Since(start) < cfg.duration && prodErr == nil {
		prodErr = db.Update(func(b *tipkv.Batch) error {
			events := make([]OrderPlaced, cfg.batch)
			for i := range events {
				o := Order{ID: fmt.Sprintf("order-%x-%06d", run, created+i), Total: 9.5, Status: "placed"}
				v, err := orders.PutIf(b, o.ID, o, 0)
				if err != nil {
					return err
				}
				events[i] = OrderPlaced{OrderID: o.ID, Version: v, Total: o.Total}
			}
			_, err := outbox.Enqueue(b, events...)
			return err
		})
		if prodErr == nil {
			created += cfg.batch
		}
	}
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	if err := errors.Join(prodErr, relayErr); err != nil {
		return err
	}

	// Every event exactly once, and each order's history tells its story.
	for id, n := range published {
		if n != 1 {
			return fmt.Errorf("event of %s published %d times", id, n)
		}
	}
	if len(published) < created {
		return fmt.Errorf("%d orders created, %d events published", created, len(published))
	}
	first := fmt.Sprintf("order-%x-%06d", run, 0)
	latest, err := orders.Latest(first)
	if err != nil {
		return err
	}
	fmt.Printf("orders created:   %d in %v (%.0f/s), each with its event in one Update\n", created, elapsed.Round(time.Millisecond), float64(created)/elapsed.Seconds())
	fmt.Printf("events published: %d, each exactly once, by a second DB handle; enqueue to publish p50 %v, p99 %v\n", len(published), pct(latencies, 0.5), pct(latencies, 0.99))
	fmt.Printf("%s: version %d, status %q, published %v\n", first, latest.Version, latest.Value.Status, latest.Value.Published)
	fmt.Println(db.EngineReport())
	return nil
}

// relay receives up to batch events at a time and, for each, publishes it
// and marks its order published, acknowledging the events in the same
// Update. When there are none it waits (on PostgreSQL, woken by
// LISTEN/NOTIFY). Once producing has ended it returns when the outbox is
// empty.
func relay(producing context.Context, db *tipkv.DB, orders *versioned.Collection[Order], outbox *queue.Queue[OrderPlaced], batch int, publish func(queue.Message[OrderPlaced])) error {
	for {
		ms, err := outbox.Receive(batch, 30*time.Second)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			if producing.Err() != nil {
				return nil
			}
			if err := outbox.Wait(producing); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			continue
		}
		update := func() error {
			return db.Update(func(b *tipkv.Batch) error {
				ids := make([]queue.ID, len(ms))
				for i, m := range ms {
					ids[i] = m.ID
					o := Order{ID: m.Value.OrderID, Total: m.Value.Total, Status: "placed", Published: true}
					if _, err := orders.PutIf(b, o.ID, o, m.Value.Version); err != nil {
						return err
					}
				}
				return outbox.Ack(b, ids...)
			})
		}
		err = update()
		for errors.Is(err, tipkv.ErrUnknownOutcome) {
			// The connection broke after the commit was sent: never
			// assume either way. Sending this Update again is safe: if the
			// first landed, its PutIf fails with ErrConflict (and its Ack
			// with ErrLeaseLost) and nothing is written twice.
			if err = update(); errors.Is(err, tipkv.ErrConflict) {
				err = nil // it had landed
			}
		}
		if err != nil {
			return err
		}
		for _, m := range ms {
			publish(m)
		}
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))].Round(time.Microsecond)
}
