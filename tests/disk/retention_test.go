package disk_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// A feed bounded by FeedRetention keeps its disk bounded however long it
// is written: here many times the retained data passes through a store on
// disk, trimmed by Retain passes between rounds of appends (as the
// background trimmer would), and the store's size after the last round
// stays a small multiple of what it retains, far below what was written.
// Sizes are read once the store has no flush or compaction running, so
// the figure does not depend on how busy the machine is.
func TestFeedRetentionKeepsDiskBounded(t *testing.T) {
	rounds, streams, keep, value := 40, 16, 256, 512
	if testutil.RaceEnabled || testing.Short() {
		rounds = 12
	}
	db, err := tipkv.Open(t.TempDir(), &tipkv.Options{NoSync: true, MemTableSize: 2 << 20})
	require.NoError(t, err)
	defer db.Close()
	f, err := versioned.NewFeed[string](db, &versioned.FeedOptions[string]{
		Retention: versioned.FeedRetention{MaxEvents: keep, Interval: -1},
	})
	require.NoError(t, err)
	payload := strings.Repeat("x", value)
	retained := uint64(streams * keep * value)
	var written, lastData uint64
	var sizes []uint64
	for r := range rounds {
		// Each round appends keep events to every stream: a whole
		// stream's worth, so every round's pass drops as much as it
		// appended.
		require.NoError(t, db.Update(func(b *tipkv.Batch) error {
			for s := range streams {
				for range keep {
					if _, err := f.Append(b, fmt.Sprint("s", s), payload); err != nil {
						return err
					}
				}
			}
			return nil
		}))
		written += uint64(streams * keep * value)
		st, err := f.Retain(context.Background())
		require.NoError(t, err)
		if r > 0 {
			require.Equal(t, versioned.RetainStats{Streams: streams, Trimmed: streams}, st)
		}
		total, data := settledDiskUsage(t, db)
		sizes, lastData = append(sizes, total), data
	}
	for s := range streams {
		n := 0
		for _, err := range f.Newest(fmt.Sprint("s", s), tipkv.Query{}) {
			require.NoError(t, err)
			n++
		}
		require.Equal(t, keep, n)
	}
	last := sizes[len(sizes)-1]
	t.Logf("retained %d KiB, written %d KiB, disk after each round (KiB): %v", retained>>10, written>>10, kib(sizes))
	require.Less(t, lastData, written/4, "the tables hold a fraction of what was written")
	require.Less(t, last-lastData, maxWAL(2<<20), "the write-ahead log's preallocated files")
	require.Less(t, last, 12*retained+8<<20, "the disk is a small multiple of what is retained")
	half := len(sizes) / 2
	require.LessOrEqual(t, slices.Max(sizes[half:]), 2*slices.Max(sizes[1:half]), "the disk does not grow with the rounds")
}

func kib(ns []uint64) []uint64 {
	out := make([]uint64, len(ns))
	for i, n := range ns {
		out[i] = n >> 10
	}
	return out
}

// settledDiskUsage returns the store's size once no flush or compaction
// is running (it waits for the engine's work, not for time), and the
// part of it that is not the write-ahead log: the log's files are
// preallocated (about 1.1 x MemTableSize each, a few kept for reuse), a
// fixed reservation whatever the data.
func settledDiskUsage(t *testing.T, db *tipkv.DB) (total, data uint64) {
	t.Helper()
	for {
		m, err := db.Metrics()
		require.NoError(t, err)
		if m.Storage.CompactionsRunning == 0 && m.Storage.FlushesRunning == 0 {
			return m.Storage.DiskUsage, m.Storage.DiskUsage - m.Storage.WALPhysicalSize
		}
		time.Sleep(time.Millisecond) // a poll of the engine's state, not a window
	}
}

// maxWAL bounds the write-ahead log's files of a store with memtables of
// memtable bytes: each is preallocated to 1.1 x memtable, and Pebble keeps
// a few obsolete ones to reuse.
func maxWAL(memtable uint64) uint64 { return 8 * memtable }

// Documents with a time to live keep the disk bounded too when their ids
// never come back (sessions): each round writes new documents, the clock
// moves past the TTL of the round before, and a purge pass drops those.
// With the collections' time index on (indexed), the same holds: the
// purges drop the documents' index entries, and KeepVersions those of
// the versions it drops (a second collection, written again each round),
// so the index keeps no entry of a version gone.
func TestDocumentTTLKeepsDiskBounded(t *testing.T) {
	for _, indexed := range []bool{false, true} {
		t.Run(fmt.Sprintf("index=%v", indexed), func(t *testing.T) { testDocumentRetentionDisk(t, indexed) })
	}
}

func testDocumentRetentionDisk(t *testing.T, indexed bool) {
	rounds, perRound, value := 40, 2048, 512
	if testutil.RaceEnabled || testing.Short() {
		rounds = 12
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	db, err := tipkv.Open(t.TempDir(), &tipkv.Options{NoSync: true, MemTableSize: 2 << 20, Clock: clock})
	require.NoError(t, err)
	defer db.Close()
	sessions, err := versioned.NewCollection[string](db, "sessions", &versioned.Options[string]{TTL: time.Minute, PurgeInterval: -1})
	require.NoError(t, err)
	profiles, err := versioned.NewCollection[string](db, "profiles", &versioned.Options[string]{KeepVersions: 3})
	require.NoError(t, err)
	const hot, hotPuts = 16, 512 // profiles written again each round
	if indexed {
		require.NoError(t, sessions.EnableTimeIndex(context.Background()))
		require.NoError(t, profiles.EnableTimeIndex(context.Background()))
	}
	payload := strings.Repeat("x", value)
	retained := uint64(perRound*value + hot*3*value)
	var written, lastData uint64
	var sizes []uint64
	for r := range rounds {
		require.NoError(t, db.Update(func(b *tipkv.Batch) error {
			for i := range perRound {
				if _, err := sessions.Put(b, fmt.Sprintf("r%d-%d", r, i), payload); err != nil {
					return err
				}
			}
			for i := range hotPuts {
				if _, err := profiles.Put(b, fmt.Sprintf("p%d", i%hot), payload); err != nil {
					return err
				}
			}
			return nil
		}))
		written += uint64((perRound + hotPuts) * value)
		mu.Lock()
		now = now.Add(time.Minute) // this round's sessions expire with the next
		mu.Unlock()
		st, err := sessions.PurgeExpired(context.Background())
		require.NoError(t, err)
		require.Equal(t, perRound, st.Purged, "round %d", r)
		total, data := settledDiskUsage(t, db)
		sizes, lastData = append(sizes, total), data
	}
	n := 0
	for _, err := range sessions.LatestAll(tipkv.Query{}) {
		require.NoError(t, err)
		n++
	}
	require.Zero(t, n, "every session has expired")
	if indexed {
		// What the index holds: the entries of the profiles' versions kept.
		require.Equal(t, hot*3, timeIndexEntries(t, db))
	}
	last := sizes[len(sizes)-1]
	t.Logf("live at most %d KiB, written %d KiB, disk after each round (KiB): %v", retained>>10, written>>10, kib(sizes))
	require.Less(t, lastData, written/4, "the tables hold a fraction of what was written")
	require.Less(t, last-lastData, maxWAL(2<<20), "the write-ahead log's preallocated files")
	half := len(sizes) / 2
	require.LessOrEqual(t, slices.Max(sizes[half:]), 2*slices.Max(sizes[1:half]), "the disk does not grow with the rounds")
}

// timeIndexEntries counts the store's time index entries (family 0x0D),
// the collections' state keys aside.
func timeIndexEntries(t *testing.T, db *tipkv.DB) int {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	it, err := s.NewIter([]byte{byte(codec.FamilyTimeIndex)}, []byte{byte(codec.FamilyTimeIndex) + 1})
	require.NoError(t, err)
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if _, rest, err := codec.DecodeString(it.Key()[1:]); err == nil && len(rest) > 2 && rest[0] == 0 && rest[1] == 1 {
			continue // a state key: the empty id
		}
		n++
	}
	require.NoError(t, it.Error())
	return n
}
