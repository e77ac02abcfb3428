package console_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/queue"
)

// A service mounts the console on its mux under a prefix, behind its own
// authentication, and lets operators requeue dead letters. Scripts read
// the same figures the pages show from the JSON endpoints.
func ExampleNew() {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	jobs, err := queue.Open[string](db, "jobs", nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := jobs.Enqueue(db, "resize", "thumbnail"); err != nil {
		log.Fatal(err)
	}

	c, err := console.New(db, &console.Options{
		Prefix: "/console",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), // every action logs a line
		Authorize: func(r *http.Request, a console.Action) error {
			if r.Header.Get("X-Role") != "operator" { // what the middleware set
				return errors.New("operators only")
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	mux := http.NewServeMux()
	mux.Handle("/console/", c) // in a service: mux.Handle("/console/", requireLogin(c))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/console/api/queues", nil))
	var qs console.Queues
	if err := json.Unmarshal(rec.Body.Bytes(), &qs); err != nil {
		log.Fatal(err)
	}
	for _, q := range qs.Queues {
		fmt.Printf("%s: depth %d, dead letters %d\n", q.Name, q.Depth, q.DeadLetters)
	}
	// Output:
	// jobs: depth 2, dead letters 0
}
