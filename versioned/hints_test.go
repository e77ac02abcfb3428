package versioned_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
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

// A DB that only reads a document (written before it opened) learns its
// latest version from its second Latest (the first only notes the miss:
// see admission): the next ones are point Gets, as for a document it
// wrote. Delete markers are learnt too; misses are not (the miss filter
// is for them).
func TestLatestReadsTeachTheVersionCache(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	users := newUsers(t, db)
	putN(t, users, db, "a", 5)
	putN(t, users, db, "b", 2)
	_, err = users.Delete(db, "b")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	db, err = tipkv.Open(dir, &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	users = newUsers(t, db)
	var c seekCounter
	defer versioned.WrapIters(c.wrap)()
	for i := range 3 {
		d, err := users.Latest("a")
		require.NoError(t, err)
		require.Equal(t, int64(5), d.Version)
		require.Equal(t, 4, d.Value.Age)
		_, err = users.Latest("b")
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		_, err = users.Latest("missing")
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		require.Equal(t, []int64{3, 6, 7}[i], c.seeks.Load(), "read %d: the first two reads of a and b seek, then only the missing id does", i)
	}
	// What was learnt serves the writes as well: a Put after it writes
	// the next version.
	_, err = users.Put(db, "a", user{Age: 5})
	require.NoError(t, err)
	d, err := users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(6), d.Version)
}

// A read that found the latest version records it only if nothing was
// written since its snapshot: here a Put of the document, and then of
// enough others that its entry leaves the small cache, happens between
// the read and the record. Recorded, the stale version would be served
// for ever after (until the next write of the document).
func TestLatestReadTeachesNothingAfterAWrite(t *testing.T) {
	defer versioned.SetCacheEntries(4)()
	dir := t.TempDir()
	db, err := tipkv.Open(dir, &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	users := newUsers(t, db)
	putN(t, users, db, "a", 3)
	require.NoError(t, db.Close())
	db, err = tipkv.Open(dir, &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	users = newUsers(t, db)
	_, err = users.Latest("a") // the first miss: noted, not learnt
	require.NoError(t, err)

	once := true
	restore := versioned.OnLearn(func() {
		if !once {
			return
		}
		once = false
		_, err := users.Put(db, "a", user{Age: 99}) // version 4
		require.NoError(t, err)
		for i := range 20 {
			_, err := users.Put(db, fmt.Sprint("other-", i), user{})
			require.NoError(t, err)
		}
	})
	d, err := users.Latest("a")
	restore()
	require.NoError(t, err)
	require.Equal(t, int64(3), d.Version, "the read's own answer is as of its snapshot")
	require.False(t, once, "the hook ran")
	d, err = users.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(4), d.Version, "nothing older than the store is served")
}
