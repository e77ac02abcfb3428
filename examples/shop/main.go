// Shop writes a small store to look at with the tipkv command line tool:
// an order with three versions, an audit feed of three events, and an
// email queue with one message waiting, one sent, and one dead letter.
// The README's command line session runs against it.
//
//	go run ./examples/shop /tmp/shop
//	tipkv check /tmp/shop
//
// DIR must be missing or empty: shop creates the store and refuses to
// write into one that exists.
package main

import (
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Order is a document of the orders collection.
type Order struct {
	Status string  `json:"status"`
	Total  float64 `json:"total"`
}

// Event is what the audit feed and the emails queue hold.
type Event struct {
	Order string `json:"order"`
	Kind  string `json:"kind"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./examples/shop DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote a shop store in", os.Args[1])
}

// start is the time of the first audit event.
var start = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func run(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty: shop writes a new store", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	db, err := tipkv.Open(dir, nil)
	if err != nil {
		return err
	}
	defer db.Close()

	orders, err := versioned.NewCollection[Order](db, "orders", nil)
	if err != nil {
		return err
	}
	feed, err := versioned.NewFeed[Event](db, nil)
	if err != nil {
		return err
	}
	for i, status := range []string{"placed", "paid", "shipped"} {
		if _, err := orders.Put(db, "o-17", Order{Status: status, Total: 42.5}); err != nil {
			return err
		}
		at := start.Add(time.Duration(i) * time.Minute)
		if _, err := feed.AppendAt(db, "audit", at, Event{Order: "o-17", Kind: status}); err != nil {
			return err
		}
	}

	// Emails are tried once: a failed one goes to the dead letters.
	emails, err := queue.Open(db, "emails", &queue.Options[Event]{MaxAttempts: 1})
	if err != nil {
		return err
	}
	for _, kind := range []string{"placed", "paid", "shipped"} {
		if _, err := emails.Enqueue(db, Event{Order: "o-17", Kind: kind}); err != nil {
			return err
		}
	}
	msgs, err := emails.Receive(2, time.Minute)
	if err != nil {
		return err
	}
	if len(msgs) != 2 {
		return fmt.Errorf("received %d emails, want 2", len(msgs))
	}
	if err := emails.Release(msgs[0].ID, 0); err != nil { // "placed" failed its only attempt
		return err
	}
	if err := emails.Ack(db, msgs[1].ID); err != nil { // "paid" was sent
		return err
	}
	// The next receive moves "placed" to the dead letters; "shipped" stays
	// in the queue (its lease ends with this process).
	if _, err := emails.Receive(1, time.Minute); err != nil {
		return err
	}
	return nil
}
