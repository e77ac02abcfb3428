package main

import (
	"testing"
	"time"
)

// A short run: every order's event is published exactly once (run checks
// it) and the numbers add up.
func TestOutboxRuns(t *testing.T) {
	r, err := run(config{duration: 200 * time.Millisecond, batch: 100, noSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.orders == 0 || r.published != r.orders || len(r.latencies) != r.orders {
		t.Fatalf("%d orders, %d published, %d latencies", r.orders, r.published, len(r.latencies))
	}
}
