package tipkv_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Order is a document: every change to an order is a new version.
type Order struct {
	Status string  `json:"status"`
	Total  float64 `json:"total"`
}

// OrderPlaced is the event that announces a version of an order.
type OrderPlaced struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

// Open a store in a directory (created if it is missing or empty), write,
// close, and open it again: what was written is there.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "tipkv-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := tipkv.Open(dir, nil) // nil options: synced writes, 128 MiB cache
	if err != nil {
		log.Fatal(err)
	}
	orders, err := versioned.NewCollection[Order](db, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := orders.Put(db, "order-17", Order{Status: "placed", Total: 42.5}); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	db, err = tipkv.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	orders, err = versioned.NewCollection[Order](db, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	doc, err := orders.Latest("order-17")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after reopening: version %d, %s, %.2f\n", doc.Version, doc.Value.Status, doc.Value.Total)

	// A second Open of a store that is open already fails.
	_, err = tipkv.Open(dir, nil)
	fmt.Println("second open:", errors.Is(err, tipkv.ErrLocked))
	// Output:
	// after reopening: version 1, placed, 42.50
	// second open: true
}

// The transactional outbox: a new version of an order and the event that
// announces it commit in one batch. After a crash both are there or
// neither is; an Update whose function fails writes nothing.
func ExampleDB_Update() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	orders, err := versioned.NewCollection[Order](db, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	outbox, err := queue.Open[OrderPlaced](db, "outbox", nil)
	if err != nil {
		log.Fatal(err)
	}

	err = db.Update(func(b *tipkv.Batch) error {
		// Write through b, never db: b commits them together.
		v, err := orders.Put(b, "order-17", Order{Status: "placed", Total: 42.5})
		if err != nil {
			return err
		}
		_, err = outbox.Enqueue(b, OrderPlaced{ID: "order-17", Version: v})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	errPayment := errors.New("payment declined")
	err = db.Update(func(b *tipkv.Batch) error {
		v, err := orders.Put(b, "order-17", Order{Status: "paid", Total: 42.5})
		if err != nil {
			return err
		}
		if _, err := outbox.Enqueue(b, OrderPlaced{ID: "order-17", Version: v}); err != nil {
			return err
		}
		return errPayment // neither the version nor its event is written
	})
	fmt.Println("second update:", err)

	doc, err := orders.Latest("order-17")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("order-17: version %d, %s\n", doc.Version, doc.Value.Status)
	fmt.Println("events in the outbox:", outbox.Len())
	// Output:
	// second update: payment declined
	// order-17: version 1, placed
	// events in the outbox: 1
}

// relay publishes the outbox's events until ctx ends: it receives a batch
// with a lease, publishes each event and acknowledges it, and when the
// outbox is empty waits (without polling) for the next commit. An event
// whose publish fails is not acknowledged: it is delivered again when its
// lease ends, so delivery is at least once.
func relay(ctx context.Context, db *tipkv.DB, outbox *queue.Queue[OrderPlaced], publish func(OrderPlaced) error) error {
	for ctx.Err() == nil {
		msgs, err := outbox.Receive(100, 30*time.Second)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := publish(m.Value); err != nil {
				continue // redelivered after the lease
			}
			if err := outbox.Ack(db, m.ID); err != nil {
				return err
			}
		}
		if len(msgs) > 0 {
			continue
		}
		if err := outbox.Wait(ctx); err != nil && ctx.Err() == nil {
			return err // the DB closed
		}
	}
	return nil // asked to stop
}

// A long-running relay: producers commit orders and their events in
// Updates while a relay goroutine publishes the events in order and
// acknowledges them, until its context is cancelled.
func Example_relay() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	orders, err := versioned.NewCollection[Order](db, "orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	outbox, err := queue.Open[OrderPlaced](db, "outbox", nil)
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	published := make(chan OrderPlaced)
	done := make(chan error)
	go func() {
		done <- relay(ctx, db, outbox, func(e OrderPlaced) error {
			published <- e // a real relay sends to a broker here
			return nil
		})
	}()

	for _, id := range []string{"order-17", "order-18", "order-17"} {
		err := db.Update(func(b *tipkv.Batch) error {
			v, err := orders.Put(b, id, Order{Status: "placed"})
			if err != nil {
				return err
			}
			_, err = outbox.Enqueue(b, OrderPlaced{ID: id, Version: v})
			return err
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		e := <-published
		fmt.Printf("published %s version %d\n", e.ID, e.Version)
	}
	stop()
	fmt.Println("relay stopped:", <-done)
	fmt.Println("events left:", outbox.Len())
	// Output:
	// published order-17 version 1
	// published order-18 version 1
	// published order-17 version 2
	// relay stopped: <nil>
	// events left: 0
}
