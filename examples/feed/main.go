// Command feed appends sensor readings to event streams and reads them
// back newest first: the newest few, a time window page by page, and
// retention by age and by count. Then a consumer group follows a stream
// oldest first, writing a running total and its cursor in one Update,
// and resumes from its cursor after the store is closed and reopened.
//
//	go run ./examples/feed
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// Reading is one sensor measurement.
type Reading struct {
	Celsius  float64 `msgpack:"c"`
	Humidity int     `msgpack:"h"`
}

func main() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	feed, err := versioned.NewFeed[Reading](db, nil)
	if err != nil {
		log.Fatal(err)
	}

	// A day of readings every 10 minutes, recorded with their own times.
	day := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 144; i++ {
		at := day.Add(time.Duration(i) * 10 * time.Minute)
		r := Reading{Celsius: 12 + float64(i%72)/6, Humidity: 40 + i%30}
		if _, err := feed.AppendAt(db, "greenhouse/1", at, r); err != nil {
			log.Fatal(err)
		}
	}
	// A live reading stamped by the clock.
	p, err := feed.Append(db, "greenhouse/1", Reading{Celsius: 21.5, Humidity: 55})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("appended 145 readings; the live one at position %d\n", p)

	fmt.Println("\nnewest 3:")
	for e, err := range feed.Newest("greenhouse/1", tipkv.Query{Limit: 3}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("  %s  %.1f°C %d%%\n", e.Time().UTC().Format(time.DateTime), e.Value.Celsius, e.Value.Humidity)
	}

	// Noon to 13:00, in pages of 4.
	from, to := day.Add(12*time.Hour), day.Add(13*time.Hour)
	q := tipkv.Query{Limit: 4}
	for page := 1; ; page++ {
		var last versioned.Event[Reading]
		n := 0
		for e, err := range feed.Between("greenhouse/1", from, to, q) {
			if err != nil {
				log.Fatal(err)
			}
			if n == 0 {
				fmt.Printf("\n[12:00, 13:00) page %d:\n", page)
			}
			fmt.Printf("  %s  %.1f°C\n", e.Time().UTC().Format("15:04"), e.Value.Celsius)
			last, n = e, n+1
		}
		if n < q.Limit {
			break
		}
		q.After = last.Cursor()
	}

	// Retention: drop the night, then keep only the newest 24.
	if err := feed.TrimBefore(db, "greenhouse/1", day.Add(6*time.Hour)); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nafter dropping readings before 06:00: %d left\n", count(feed))
	if err := feed.Trim(db, "greenhouse/1", 24); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after keeping the newest 24: %d left\n", count(feed))

	follow()
}

// follow runs a consumer group, "totals", over the stream "orders" of a
// store on disk: it follows the stream from its cursor and, per event,
// adds the order to a running total (a document) and advances its cursor
// in the same Update, so the total counts each order exactly once. The
// store is closed halfway, as a restart would, and the group resumes
// from its cursor.
func follow() {
	dir, err := os.MkdirTemp("", "tipkv-feed-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "store")
	for run := 1; run <= 2; run++ {
		db, err := tipkv.Open(path, nil)
		if err != nil {
			log.Fatal(err)
		}
		orders, err := versioned.NewFeed[int](db, nil)
		if err != nil {
			log.Fatal(err)
		}
		totals, err := versioned.NewCollection[int](db, "totals", nil)
		if err != nil {
			log.Fatal(err)
		}
		for i := 1; i <= 3; i++ { // three new orders per run
			if _, err := orders.Append(db, "orders", 10*run+i); err != nil {
				log.Fatal(err)
			}
		}
		cur, err := orders.Cursor("orders", "totals")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("\nrun %d: group \"totals\" resumes after position %d\n", run, cur)
		ctx, cancel := context.WithCancel(context.Background())
		handled := 0
		for e, err := range orders.Follow(ctx, "orders", cur) {
			if err != nil {
				log.Fatal(err)
			}
			err := db.Update(func(tx *tipkv.Batch) error {
				sum := 0
				if d, err := totals.Latest("all"); err == nil {
					sum = d.Value
				}
				if _, err := totals.Put(tx, "all", sum+e.Value); err != nil {
					return err
				}
				return orders.Advance(tx, "orders", "totals", cur, e.Position)
			})
			if err != nil {
				log.Fatal(err)
			}
			cur = e.Position
			fmt.Printf("  order of %d handled\n", e.Value)
			if handled++; handled == 3 {
				cancel() // caught up with this run's orders: stop, as a process would
				break
			}
		}
		cancel()
		d, err := totals.Latest("all")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("  total so far: %d\n", d.Value)
		if err := db.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

func count(feed *versioned.Feed[Reading]) int {
	n := 0
	for _, err := range feed.Newest("greenhouse/1", tipkv.Query{}) {
		if err != nil {
			log.Fatal(err)
		}
		n++
	}
	return n
}
