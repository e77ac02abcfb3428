package main

import (
	"strings"
	"testing"
)

// The example runs on a cluster of its own: every message arrives once and
// names a version that reads back (run checks both).
func TestSharedRuns(t *testing.T) {
	var out []string
	if err := run("", 10, func(s string) { out = append(out, s) }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(strings.Join(out, "\n"), "shipping "); got != 10 {
		t.Fatalf("%d shipments, want 10:\n%s", got, strings.Join(out, "\n"))
	}
}
