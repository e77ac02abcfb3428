// Command feed appends sensor readings to event streams and reads them
// back newest first: the newest few, a time window page by page, and
// retention by age and by count.
//
//	go run ./examples/feed
package main

import (
	"fmt"
	"log"
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
