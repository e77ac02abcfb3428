// Command outbox runs the transactional outbox loop: a producer writes
// orders (document versions) and their OrderPlaced events in one atomic
// Update, 1,000 orders to an Update; a relay receives events 1,000 at a
// time, publishes them (here it counts them, and checks that each order's
// event comes exactly once) and acknowledges them. Both run for a set time;
// then the relay drains the outbox and the program prints throughput,
// latency and disk size.
//
//	go run ./examples/outbox -d 10s
//	go run ./examples/outbox -dir /tmp/outbox -nosync
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Order is the document: every change to an order is a new version.
type Order struct {
	ID       string  `msgpack:"id"`
	Customer string  `msgpack:"customer"`
	Total    float64 `msgpack:"total"`
	Status   string  `msgpack:"status"`
}

// OrderPlaced is the event the outside world hears about.
type OrderPlaced struct {
	OrderID string  `msgpack:"order"`
	Version int64   `msgpack:"version"`
	Total   float64 `msgpack:"total"`
}

type config struct {
	dir      string        // "" for a temporary directory
	duration time.Duration // how long the producer runs
	batch    int           // orders per Update, events per Receive
	noSync   bool
}

type report struct {
	orders, published int
	elapsed, drain    time.Duration
	latencies         []time.Duration // enqueue to publish
	disk, dirBytes    int64
}

func main() {
	var cfg config
	flag.StringVar(&cfg.dir, "dir", "", "store directory (default: a temporary one, removed at the end)")
	flag.DurationVar(&cfg.duration, "d", 3*time.Second, "how long the producer runs")
	flag.IntVar(&cfg.batch, "batch", 1000, "orders per Update and events per Receive")
	flag.BoolVar(&cfg.noSync, "nosync", false, "open the store with NoSync")
	flag.Parse()
	r, err := run(cfg)
	if err != nil {
		log.Fatal(err)
	}
	secs := r.elapsed.Seconds()
	fmt.Printf("orders written:   %d in %v (%.0f orders/s, each a document version and an event in one Update)\n",
		r.orders, r.elapsed.Round(time.Millisecond), float64(r.orders)/secs)
	fmt.Printf("events published: %d, each exactly once (%.0f events/s; %v to drain the rest)\n",
		r.published, float64(r.published)/secs, r.drain.Round(time.Millisecond))
	fmt.Printf("relay latency:    p50 %v, p99 %v, enqueue to publish\n", pct(r.latencies, 0.5), pct(r.latencies, 0.99))
	fmt.Printf("disk:             %.1f MiB (Pebble's count), %.1f MiB of files\n", float64(r.disk)/(1<<20), float64(r.dirBytes)/(1<<20))
}

func run(cfg config) (report, error) {
	var r report
	if cfg.batch < 1 {
		return r, fmt.Errorf("batch %d: want at least 1", cfg.batch)
	}
	dir := cfg.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "tipkv-outbox-")
		if err != nil {
			return r, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	db, err := tipkv.Open(dir, &tipkv.Options{NoSync: cfg.noSync})
	if err != nil {
		return r, err
	}
	defer db.Close()
	orders, err := versioned.NewCollection[Order](db, "orders", nil)
	if err != nil {
		return r, err
	}
	outbox, err := queue.Open[OrderPlaced](db, "outbox", nil)
	if err != nil {
		return r, err
	}

	// The relay runs until the producer is done (producing ends) and the
	// outbox is empty.
	producing, stop := context.WithCancel(context.Background())
	defer stop()
	seen := map[string]bool{}
	var relayErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		relayErr = relay(producing, db, outbox, cfg.batch, func(ms []queue.Message[OrderPlaced]) error {
			now := time.Now()
			for _, m := range ms {
				if seen[m.Value.OrderID] {
					return fmt.Errorf("event of %s published twice", m.Value.OrderID)
				}
				seen[m.Value.OrderID] = true
				r.latencies = append(r.latencies, now.Sub(m.Enqueued))
			}
			r.published += len(ms)
			return nil
		})
	}()

	// The producer: each Update writes a batch of orders and their events.
	start := time.Now()
	events := make([]OrderPlaced, cfg.batch)
	var prodErr error
	for time.Since(start) < cfg.duration && prodErr == nil {
		prodErr = db.Update(func(b *tipkv.Batch) error {
			for i := range events {
				o := Order{ID: fmt.Sprintf("order-%09d", r.orders+i), Customer: "c-17", Total: 9.5, Status: "placed"}
				v, err := orders.Put(b, o.ID, o)
				if err != nil {
					return err
				}
				events[i] = OrderPlaced{OrderID: o.ID, Version: v, Total: o.Total}
			}
			_, err := outbox.Enqueue(b, events...)
			return err
		})
		if prodErr == nil {
			r.orders += cfg.batch
		}
	}
	r.elapsed = time.Since(start)
	stop()
	wg.Wait()
	r.drain = time.Since(start) - r.elapsed
	if err := errors.Join(prodErr, relayErr); err != nil {
		return r, err
	}
	if r.published != r.orders || len(seen) != r.orders {
		return r, fmt.Errorf("%d orders written, %d events published", r.orders, r.published)
	}
	r.disk = int64(db.DiskUsage())
	r.dirBytes, err = dirSize(dir)
	return r, err
}

// relay receives up to batch events, publishes them and acknowledges
// them; when there are none it waits for more. Once producing has ended it
// returns as soon as the outbox is empty: every Update has returned by
// then, so every event is visible.
func relay(producing context.Context, db *tipkv.DB, outbox *queue.Queue[OrderPlaced], batch int, publish func([]queue.Message[OrderPlaced]) error) error {
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
		if err := publish(ms); err != nil {
			return err
		}
		ids := make([]queue.ID, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		if err := outbox.Ack(db, ids...); err != nil {
			return err
		}
	}
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	return n, err
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))].Round(time.Microsecond)
}
