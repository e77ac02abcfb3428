package versioned_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

type Profile struct {
	Name  string `msgpack:"name"`
	Email string `msgpack:"email"`
}

func openExample() *tipkv.DB {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	return db
}

func ExampleCollection_Put() {
	db := openExample()
	defer db.Close()
	profiles, err := versioned.NewCollection[Profile](db, "profiles", nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, email := range []string{"ada@example.com", "ada@math.org", "countess@lovelace.uk"} {
		v, err := profiles.Put(db, "ada", Profile{Name: "Ada", Email: email})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("wrote version", v)
	}
	latest, err := profiles.Latest("ada")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("latest:", latest.Version, latest.Value.Email)
	// Output:
	// wrote version 1
	// wrote version 2
	// wrote version 3
	// latest: 3 countess@lovelace.uk
}

func ExampleCollection_PutIf() {
	db := openExample()
	defer db.Close()
	profiles, _ := versioned.NewCollection[Profile](db, "profiles", nil)

	// Create only if absent, then update only what we read.
	_, err := profiles.PutIf(db, "ada", Profile{Name: "Ada"}, 0)
	fmt.Println("create:", err)
	_, err = profiles.PutIf(db, "ada", Profile{Name: "Ada"}, 0)
	fmt.Println("create again:", err)
	d, _ := profiles.Latest("ada")
	v, err := profiles.PutIf(db, "ada", Profile{Name: "Ada", Email: "ada@math.org"}, d.Version)
	fmt.Println("update on version", d.Version, "->", v, err)
	// Output:
	// create: <nil>
	// create again: tipkv: conflict: collection "profiles", id "ada": latest version is 1, expected 0
	// update on version 1 -> 2 <nil>
}

func ExampleCollection_AsOf() {
	db := openExample()
	defer db.Close()
	prices, _ := versioned.NewCollection[int](db, "prices", nil)
	for _, p := range []int{100, 120, 90, 95} {
		_, _ = prices.Put(db, "widget", p)
	}
	for _, v := range []int64{1, 3, 10} {
		d, _ := prices.AsOf("widget", v)
		fmt.Printf("as of version %d: version %d, price %d\n", v, d.Version, d.Value)
	}
	// Output:
	// as of version 1: version 1, price 100
	// as of version 3: version 3, price 90
	// as of version 10: version 4, price 95
}

func ExampleCollection_History() {
	db := openExample()
	defer db.Close()
	prices, _ := versioned.NewCollection[int](db, "prices", nil)
	for p := 1; p <= 7; p++ {
		_, _ = prices.Put(db, "widget", p*10)
	}
	// Pages of 3, newest first, each starting after the last one's cursor.
	q := tipkv.Query{Limit: 3}
	for page := 1; ; page++ {
		var last versioned.Doc[int]
		n := 0
		for d, err := range prices.History("widget", q) {
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("page %d: version %d price %d\n", page, d.Version, d.Value)
			last, n = d, n+1
		}
		if n < q.Limit {
			break
		}
		q.After = last.Cursor()
	}
	// Output:
	// page 1: version 7 price 70
	// page 1: version 6 price 60
	// page 1: version 5 price 50
	// page 2: version 4 price 40
	// page 2: version 3 price 30
	// page 2: version 2 price 20
	// page 3: version 1 price 10
}

func ExampleCollection_LatestAll() {
	db := openExample()
	defer db.Close()
	stock, _ := versioned.NewCollection[int](db, "stock", nil)
	for i, id := range []string{"eu/paris", "eu/rome", "us/austin", "eu/paris"} {
		_, _ = stock.Put(db, id, i)
	}
	for d, err := range stock.LatestAll(tipkv.Query{Prefix: "eu/"}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.ID, "version", d.Version, "value", d.Value)
	}
	// Output:
	// eu/paris version 2 value 3
	// eu/rome version 1 value 1
}

func ExampleCollection_Prune() {
	db := openExample()
	defer db.Close()
	notes, _ := versioned.NewCollection[string](db, "notes", nil)
	for i := 1; i <= 10; i++ {
		_, _ = notes.Put(db, "todo", fmt.Sprint("draft ", i))
	}
	n, _ := notes.Prune(db, "todo", 3)
	fmt.Println("pruned", n)
	for d := range notes.History("todo", tipkv.Query{}) {
		fmt.Println(d.Version, d.Value)
	}
	// Output:
	// pruned 7
	// 10 draft 10
	// 9 draft 9
	// 8 draft 8
}

// A document version and a feed event written atomically: pass the Batch,
// not the DB, inside Update.
func ExampleCollection_Put_update() {
	db := openExample()
	defer db.Close()
	orders, _ := versioned.NewCollection[string](db, "orders", nil)
	audit, _ := versioned.NewFeed[string](db, nil)
	err := db.Update(func(b *tipkv.Batch) error {
		v, err := orders.Put(b, "o-1", "paid")
		if err != nil {
			return err
		}
		_, err = audit.Append(b, "orders", fmt.Sprintf("o-1 is paid (version %d)", v))
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	for e := range audit.Newest("orders", tipkv.Query{Limit: 1}) {
		fmt.Println(e.Value)
	}
	// Output:
	// o-1 is paid (version 1)
}

func ExampleFeed_Append() {
	db := openExample()
	defer db.Close()
	// A clock stuck at one instant, to show how ties are broken.
	now := time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)
	feed, _ := versioned.NewFeed[string](db, &versioned.FeedOptions[string]{Clock: func() time.Time { return now }})
	for _, page := range []string{"/", "/pricing", "/signup"} {
		p, _ := feed.Append(db, "clicks", page)
		fmt.Println(p-now.UnixNano(), "ns after 9:00", page)
	}
	for e := range feed.Newest("clicks", tipkv.Query{Limit: 2}) {
		fmt.Println(e.Time().UTC().Format(time.RFC3339Nano), e.Value)
	}
	// Output:
	// 0 ns after 9:00 /
	// 1 ns after 9:00 /pricing
	// 2 ns after 9:00 /signup
	// 2025-01-01T09:00:00.000000002Z /signup
	// 2025-01-01T09:00:00.000000001Z /pricing
}

func ExampleFeed_Between() {
	db := openExample()
	defer db.Close()
	temps, _ := versioned.NewFeed[float64](db, nil)
	start := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for h, c := range []float64{14.5, 13.9, 13.2, 15.8, 19.1} {
		_, _ = temps.AppendAt(db, "paris", start.Add(time.Duration(h)*time.Hour), c)
	}
	for e := range temps.Between("paris", start.Add(time.Hour), start.Add(4*time.Hour), tipkv.Query{}) {
		fmt.Println(e.Time().UTC().Format("15:04"), e.Value)
	}
	// Retention: drop the readings taken before 03:00.
	_ = temps.TrimBefore(db, "paris", start.Add(3*time.Hour))
	n := 0
	for range temps.Newest("paris", tipkv.Query{}) {
		n++
	}
	fmt.Println("kept", n)
	// Output:
	// 03:00 15.8
	// 02:00 13.2
	// 01:00 13.9
	// kept 2
}

// Delete keeps the history and writes a marker as the next version, so a
// version number never comes back: a stale PutIf fails, and the next Put
// continues after the marker.
func ExampleCollection_Delete() {
	db := openExample()
	defer db.Close()
	pages, _ := versioned.NewCollection[string](db, "pages", nil)
	_, _ = pages.Put(db, "home", "hello")
	_, _ = pages.Put(db, "home", "hello, world")
	marker, err := pages.Delete(db, "home")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("delete marker at version", marker)
	_, err = pages.Latest("home")
	fmt.Println(err)
	for d := range pages.History("home", tipkv.Query{}) {
		fmt.Printf("version %d deleted=%v %q\n", d.Version, d.Deleted, d.Value)
	}
	_, err = pages.PutIf(db, "home", "stale edit", 2)
	fmt.Println(err)
	v, _ := pages.PutIf(db, "home", "back again", 0) // 0: no live document
	fmt.Println("recreated as version", v)
	// Output:
	// delete marker at version 3
	// tipkv: not found: collection "pages", id "home": deleted (delete marker at version 3)
	// version 3 deleted=true ""
	// version 2 deleted=false "hello, world"
	// version 1 deleted=false "hello"
	// tipkv: conflict: collection "pages", id "home": latest version is 3 (a delete marker), expected 2
	// recreated as version 4
}

// Purge drops the whole history; only then do versions start again at 1.
func ExampleCollection_Purge() {
	db := openExample()
	defer db.Close()
	pages, _ := versioned.NewCollection[string](db, "pages", nil)
	for _, s := range []string{"a", "b", "c"} {
		_, _ = pages.Put(db, "tmp", s)
	}
	n, _ := pages.Purge(db, "tmp")
	fmt.Println("purged", n)
	v, _ := pages.Put(db, "tmp", "new")
	fmt.Println("next version", v)
	// Output:
	// purged 3
	// next version 1
}

// HistoryPage says whether there is a next page: next is empty at the end.
func ExampleCollection_HistoryPage() {
	db := openExample()
	defer db.Close()
	prices, _ := versioned.NewCollection[int](db, "prices", nil)
	for p := 1; p <= 5; p++ {
		_, _ = prices.Put(db, "widget", p*10)
	}
	q := tipkv.Query{Limit: 2}
	for page := 1; ; page++ {
		docs, next, err := prices.HistoryPage("widget", q)
		if err != nil {
			log.Fatal(err)
		}
		for _, d := range docs {
			fmt.Printf("page %d: version %d price %d\n", page, d.Version, d.Value)
		}
		if next == "" {
			break
		}
		q.After = next
	}
	// Output:
	// page 1: version 5 price 50
	// page 1: version 4 price 40
	// page 2: version 3 price 30
	// page 2: version 2 price 20
	// page 3: version 1 price 10
}

// LatestMany answers in the order asked; a miss is the zero Doc.
func ExampleCollection_LatestMany() {
	db := openExample()
	defer db.Close()
	stock, _ := versioned.NewCollection[int](db, "stock", nil)
	_, _ = stock.Put(db, "paris", 3)
	_, _ = stock.Put(db, "rome", 7)
	_, _ = stock.Put(db, "rome", 6)
	docs, err := stock.LatestMany("rome", "oslo", "paris")
	if err != nil {
		log.Fatal(err)
	}
	for i, id := range []string{"rome", "oslo", "paris"} {
		if docs[i].Version == 0 {
			fmt.Println(id, "not found")
			continue
		}
		fmt.Println(id, "version", docs[i].Version, "stock", docs[i].Value)
	}
	n, _ := stock.Count("rome")
	fmt.Println("rome keeps", n, "versions")
	// Output:
	// rome version 2 stock 6
	// oslo not found
	// paris version 1 stock 3
	// rome keeps 2 versions
}

func ExampleCollections() {
	db := openExample()
	defer db.Close()
	for _, name := range []string{"users", "orders"} {
		c, _ := versioned.NewCollection[string](db, name, nil)
		_, _ = c.Put(db, "x", "y")
	}
	feed, _ := versioned.NewFeed[string](db, nil)
	_, _ = feed.Append(db, "audit", "started")
	for name, err := range versioned.Collections(db) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("collection", name)
	}
	for name, err := range versioned.Streams(db) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("stream", name)
	}
	// Output:
	// collection orders
	// collection users
	// stream audit
}

// A collection of sessions that expire half an hour after their last
// write. The clock is set by hand here; a service leaves the DB's clock
// (time.Now) and the background purge (every PurgeInterval) to do this.
func ExampleOptions_ttl() {
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, Clock: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	sessions, err := versioned.NewCollection[Profile](db, "sessions", &versioned.Options[Profile]{
		TTL:           30 * time.Minute,
		PurgeInterval: -1, // no background purge: PurgeExpired below
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := sessions.Put(db, "s1", Profile{Name: "Ada"}); err != nil {
		log.Fatal(err)
	}
	now = now.Add(31 * time.Minute)
	_, err = sessions.Latest("s1")
	fmt.Println("after 31 minutes:", errors.Is(err, tipkv.ErrNotFound))
	st, err := sessions.PurgeExpired(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("purged:", st.Purged)
	// Output:
	// after 31 minutes: true
	// purged: 1
}

// A feed whose streams under "clicks/" keep their newest 3 events. A
// service leaves the trimming to the background trimmer (every
// Retention.Interval); Retain runs one pass now.
func ExampleFeed_Retain() {
	db := openExample()
	defer db.Close()
	feed, err := versioned.NewFeed[string](db, &versioned.FeedOptions[string]{
		Retention: versioned.FeedRetention{Streams: "clicks/", MaxEvents: 3, Interval: -1},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, page := range []string{"/", "/a", "/b", "/c", "/d"} {
		if _, err := feed.Append(db, "clicks/ada", page); err != nil {
			log.Fatal(err)
		}
	}
	st, err := feed.Retain(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("streams trimmed:", st.Trimmed)
	for e, err := range feed.Newest("clicks/ada", tipkv.Query{}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Value)
	}
	// Output:
	// streams trimmed: 1
	// /d
	// /c
	// /b
}
