// Quickstart opens a tipkv store in a temporary directory, keeps a document's
// version history, appends to an event feed, and runs a transactional
// outbox: an order and its event written in one atomic Update, then relayed
// through a queue. It prints what it did.
//
//	go run ./examples/quickstart
package main

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

type Profile struct {
	Name  string `msgpack:"name"`
	Email string `msgpack:"email"`
}

type Order struct {
	ID    string  `msgpack:"id"`
	Total float64 `msgpack:"total"`
}

type OrderPlaced struct {
	OrderID string `msgpack:"order_id"`
	Version int64  `msgpack:"version"`
}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "tipkv-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	db, err := tipkv.Open(dir, nil) // synced writes, 128 MiB block cache
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Println("opened a store in", dir)

	// Documents: every Put writes the next version; reads are one seek.
	profiles, err := versioned.NewCollection[Profile](db, "profiles", nil)
	if err != nil {
		return err
	}
	for _, email := range []string{"ada@example.com", "ada@work.example", "ada@home.example"} {
		v, err := profiles.Put(db, "ada", Profile{Name: "Ada", Email: email})
		if err != nil {
			return err
		}
		fmt.Printf("put profile ada version %d: %s\n", v, email)
	}
	latest, err := profiles.Latest("ada")
	if err != nil {
		return err
	}
	fmt.Printf("latest: version %d, %s\n", latest.Version, latest.Value.Email)
	old, err := profiles.AsOf("ada", 2)
	if err != nil {
		return err
	}
	fmt.Printf("as of version 2: %s\n", old.Value.Email)
	fmt.Print("history, newest first:")
	for doc, err := range profiles.History("ada", tipkv.Query{Limit: 10}) {
		if err != nil {
			return err
		}
		fmt.Printf(" v%d", doc.Version)
	}
	fmt.Println()

	// Feeds: events ordered by a position that reads as a time.
	logins, err := versioned.NewFeed[string](db, nil)
	if err != nil {
		return err
	}
	for _, who := range []string{"ada", "grace", "edsger"} {
		if _, err := logins.Append(db, "logins", who); err != nil {
			return err
		}
	}
	fmt.Print("newest 2 logins:")
	for ev, err := range logins.Newest("logins", tipkv.Query{Limit: 2}) {
		if err != nil {
			return err
		}
		fmt.Printf(" %s", ev.Value)
	}
	fmt.Println()

	// Transactional outbox: the order and its event commit together.
	orders, err := versioned.NewCollection[Order](db, "orders", nil)
	if err != nil {
		return err
	}
	outbox, err := queue.Open[OrderPlaced](db, "order-events", nil)
	if err != nil {
		return err
	}
	err = db.Update(func(b *tipkv.Batch) error {
		v, err := orders.Put(b, "order-17", Order{ID: "order-17", Total: 42.5})
		if err != nil {
			return err
		}
		_, err = outbox.Enqueue(b, OrderPlaced{OrderID: "order-17", Version: v})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Println("wrote order-17 and its event in one atomic update")

	// A relay receives the event under a lease, publishes it, and acks it.
	msgs, err := outbox.Receive(10, 30*time.Second)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		fmt.Printf("relayed event %d: order %s version %d\n", m.Seq, m.Value.OrderID, m.Value.Version)
		if err := outbox.Ack(db, m.ID); err != nil {
			return err
		}
	}
	fmt.Printf("outbox now holds %d messages\n", outbox.Len())
	return nil
}
