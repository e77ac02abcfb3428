package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/versioned"
)

// BenchmarkPages times the server side of the pages an operator opens on
// a collection of 1,000,000 documents (issue 29's target: under 100 ms
// each, paged, never a full scan): the overview, the collection's first
// page and a page deep into it (after= the cursor of
// document 999,000), a document's history, and a
// diff. The store is built once, on disk, synced at the end; each
// iteration serves one request through the handler. ns/op is the time of
// one page; a page that scanned the collection would take seconds.
//
//	go test -run '^$' -bench BenchmarkPages -benchtime 200x ./console/
func BenchmarkPages(b *testing.B) {
	const docs = 1_000_000
	db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	type order struct {
		Status string  `msgpack:"status"`
		Total  float64 `msgpack:"total"`
	}
	orders, err := versioned.NewCollection[order](db, "orders", nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < docs; i += 1000 {
		err := db.Update(func(bt *tipkv.Batch) error {
			for j := i; j < i+1000; j++ {
				if _, err := orders.Put(bt, fmt.Sprintf("o-%07d", j), order{"placed", float64(j)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range []string{"paid", "shipped"} {
		if _, err := orders.Put(db, "o-0500000", order{s, 1}); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	var deep versioned.Doc[order] // the cursor of a page deep into the listing
	for d, err := range orders.LatestAll(tipkv.Query{Prefix: "o-0999000", Limit: 1}) {
		if err != nil {
			b.Fatal(err)
		}
		deep = d
	}
	c, err := console.New(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, p := range []struct{ name, url string }{
		{"overview", "/"},
		{"collection", "/collection?name=orders"},
		{"collection-deep", "/collection?name=orders&after=" + url.QueryEscape(string(deep.Cursor()))},
		{"collection-api", "/api/collection?name=orders&prefix=o-05"},
		{"document", "/document?name=orders&id=o-0500000"},
		{"diff", "/diff?name=orders&id=o-0500000&a=1&b=3"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, p.url, nil))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.url, w.Code, w.Body)
				}
			}
		})
	}
}
