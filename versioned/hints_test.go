package versioned_test

import (
	"fmt"
	"math"
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
func TestLatestFromHintsNeverOlderThanTheStore(t *testing.T) {
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
					if _, err := users.Put(db, fmt.Sprint("d", i), user{Age: g*1000 + r}); err != nil {
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
					id := fmt.Sprint("d", i)
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
