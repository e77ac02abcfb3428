// Command history edits a document over time and reads its history back:
// the latest version, the version as of an earlier one, a page of history
// and the next page, then prunes old versions.
//
//	go run ./examples/history
package main

import (
	"fmt"
	"log"
	"os"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// Page is a wiki page; every edit is a new version.
type Page struct {
	Title  string `msgpack:"title"`
	Body   string `msgpack:"body"`
	Author string `msgpack:"author"`
}

func main() {
	dir, err := os.MkdirTemp("", "tipkv-history-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := tipkv.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	pages, err := versioned.NewCollection[Page](db, "pages", nil)
	if err != nil {
		log.Fatal(err)
	}

	// Ten edits by three authors.
	authors := []string{"ada", "grace", "edsger"}
	for i := 1; i <= 10; i++ {
		v, err := pages.Put(db, "home", Page{
			Title:  "Home",
			Body:   fmt.Sprintf("Welcome! (edit %d)", i),
			Author: authors[i%len(authors)],
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("edit by %-6s -> version %d\n", authors[i%len(authors)], v)
	}

	latest, err := pages.Latest("home")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nlatest: version %d by %s: %q\n", latest.Version, latest.Value.Author, latest.Value.Body)

	old, err := pages.AsOf("home", 4)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("as of version 4: version %d by %s: %q\n", old.Version, old.Value.Author, old.Value.Body)

	// A page of four, then the next one from its cursor, as an API would
	// hand the cursor to its client and take it back.
	q := tipkv.Query{Limit: 4}
	for n := 1; n <= 2; n++ {
		fmt.Printf("\nhistory page %d:\n", n)
		var last versioned.Doc[Page]
		for d, err := range pages.History("home", q) {
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("  version %2d by %-6s %q\n", d.Version, d.Value.Author, d.Value.Body)
			last = d
		}
		q.After = last.Cursor()
		fmt.Printf("  next cursor: %s\n", q.After)
	}

	// Keep the three newest versions.
	n, err := pages.Prune(db, "home", 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\npruned %d versions; what is left:\n", n)
	for d, err := range pages.History("home", tipkv.Query{}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("  version %2d %q\n", d.Version, d.Value.Body)
	}
	if _, err := pages.AsOf("home", 4); err != nil {
		fmt.Println("as of version 4 now:", err)
	}
}
