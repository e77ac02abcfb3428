package versioned_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// Every group of the DB, with what each has left to handle.
func ExampleFeed_Backlog() {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, Clock: func() time.Time { return at }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	feed, err := versioned.NewFeed[string](db, nil)
	if err != nil {
		log.Fatal(err)
	}
	var ps []int64
	for i, order := range []string{"o-1", "o-2", "o-3"} {
		at = at.Add(time.Duration(i) * time.Minute)
		p, err := feed.Append(db, "orders", order)
		if err != nil {
			log.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := feed.Advance(db, "orders", "billing", 0, ps[0]); err != nil {
		log.Fatal(err)
	}
	if err := feed.Advance(db, "orders", "shipping", 0, ps[2]); err != nil {
		log.Fatal(err)
	}
	now := at.Add(time.Hour)
	for g, err := range feed.AllGroups() {
		if err != nil {
			log.Fatal(err)
		}
		b, err := feed.Backlog(g.Stream, g.Name, 1000)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s/%s: %d pending, lag %v, oldest waiting %v\n", b.Stream, b.Name, b.Pending, b.Lag(), b.PendingAge(now))
	}
	// Output:
	// orders/billing: 2 pending, lag 3m0s, oldest waiting 1h2m0s
	// orders/shipping: 0 pending, lag 0s, oldest waiting 0s
}

// A group whose consumer is gone holds retention back: each pass warns
// (Options.Logger, Metrics) once an event has waited past StaleGroups,
// and with DropStaleGroups drops the group and trims on.
func ExampleFeedRetention_staleGroups() {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	feed, err := versioned.NewFeed[string](db, &versioned.FeedOptions[string]{
		Retention: versioned.FeedRetention{MaxEvents: 2, Interval: -1, StaleGroups: 24 * time.Hour, DropStaleGroups: true},
	})
	if err != nil {
		log.Fatal(err)
	}
	var first int64
	for i := range 5 {
		p, err := feed.Append(db, "clicks", fmt.Sprint("/", i))
		if err != nil {
			log.Fatal(err)
		}
		if i == 0 {
			first = p
		}
	}
	if err := feed.Advance(db, "clicks", "gone", 0, first); err != nil {
		log.Fatal(err)
	}
	st, err := feed.Retain(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("now: %+v\n", st)
	at = at.Add(25 * time.Hour)
	st, err = feed.Retain(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("a day later: %+v\n", st)
	// Output:
	// now: {Streams:1 Trimmed:1 StaleGroups:0 GroupsDropped:0}
	// a day later: {Streams:1 Trimmed:1 StaleGroups:0 GroupsDropped:1}
}
