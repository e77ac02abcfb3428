package versioned_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tipkv/tipkv/versioned"
)

// Latest answers from the version cache without the writer's mutex (see
// hints.go); it must never answer older than what the store already shows.
// Writers Put a few documents through a cache far smaller than them (so
// entries leave and come back) while readers read each document's latest
// version with a seek (AsOf of the greatest version: the store) and then
// with Latest: Latest may be newer, never older.
// Ids short enough for their key to sit in a slot of the table, and ids
// too long for it (read through the entry), both.
func TestLatestFromHintsNeverOlderThanTheStore(t *testing.T) {
	for _, prefix := range []string{"d", strings.Repeat("long-", 12)} {
		t.Run(map[bool]string{true: "key-in-slot", false: "key-too-long"}[len(prefix) < 10], func(t *testing.T) {
			testLatestFromHints(t, prefix)
		})
	}
}

func testLatestFromHints(t *testing.T, prefix string) {
	defer versioned.SetCacheEntries(8)()
	db, users := openUsers(t)
	const docs = 24
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	var stop atomic.Bool
	var writers, readers sync.WaitGroup
	for g := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for r := range rounds {
				for i := range docs {
					if _, err := users.Put(db, fmt.Sprint(prefix, i), user{Age: g*1000 + r}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	var checks atomic.Int64
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !stop.Load() {
				for i := range docs {
					id := fmt.Sprint(prefix, i)
					seen, err := users.AsOf(id, math.MaxInt64)
					if err != nil {
						continue // not written yet
					}
					got, err := users.Latest(id)
					if err != nil || got.Version < seen.Version {
						t.Errorf("%s: Latest %d (%v) after the store showed %d", id, got.Version, err, seen.Version)
						return
					}
					checks.Add(1)
				}
			}
		}()
	}
	writers.Wait()
	stop.Store(true)
	readers.Wait()
	if checks.Load() == 0 {
		t.Fatal("no read checked")
	}
}
