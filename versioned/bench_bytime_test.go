package versioned_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/paired"
	"github.com/tipkv/tipkv/versioned"
)

// The cost curve of AsOfTime without a time index (issue 26): a read at a
// random time among a document's versions is a binary search over them,
// against AsOf of the same version (one seek), paired in one process, for
// histories of 16 to 65,536 versions, one per second, on disk, compacted.
// And with the latest version answering (a time after it): one seek,
// against Latest.
//
//	go test -run '^$' -bench 'BenchmarkAsOfTime' -benchtime 42000x -count 3 ./versioned/
//
// The rows op=asoftime-indexed are the same reads with the collection's
// time index on (issue 26: at most 1.2x AsOf), in a second store of the
// same history.
func BenchmarkAsOfTime(b *testing.B) {
	for _, n := range []int{16, 256, 4096, 65536} {
		var c, ci *versioned.Collection[[]byte]
		var t0 time.Time
		build := func() {
			if c == nil {
				c, t0 = timedHistory(b, n, false)
			}
		}
		buildIndexed := func() {
			if ci == nil {
				ci, t0 = timedHistory(b, n, true)
			}
		}
		rng := rand.New(rand.NewPCG(uint64(n), 26))
		b.Run(fmt.Sprintf("versions=%d/op=asoftime/vs=asof", n), func(sb *testing.B) {
			build()
			var v int64
			paired.Ratio(sb, func() {
				v = 1 + rng.Int64N(int64(n)-1) // not the latest
				d, err := c.AsOfTime("doc", t0.Add(time.Duration(v-1)*time.Second+time.Millisecond))
				if err != nil || d.Version != v {
					sb.Fatalf("AsOfTime: version %d, %v; want %d", d.Version, err, v)
				}
			}, func() {
				if _, err := c.AsOf("doc", 1+rng.Int64N(int64(n)-1)); err != nil {
					sb.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("versions=%d/op=asoftime-indexed/vs=asof", n), func(sb *testing.B) {
			buildIndexed()
			var v int64
			paired.Ratio(sb, func() {
				v = 1 + rng.Int64N(int64(n)-1) // not the latest
				d, err := ci.AsOfTime("doc", t0.Add(time.Duration(v-1)*time.Second+time.Millisecond))
				if err != nil || d.Version != v {
					sb.Fatalf("AsOfTime: version %d, %v; want %d", d.Version, err, v)
				}
			}, func() {
				if _, err := ci.AsOf("doc", 1+rng.Int64N(int64(n)-1)); err != nil {
					sb.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("versions=%d/op=asoftime-latest/vs=latest", n), func(sb *testing.B) {
			build()
			after := t0.Add(time.Duration(n) * time.Second)
			paired.Ratio(sb, func() {
				if _, err := c.AsOfTime("doc", after); err != nil {
					sb.Fatal(err)
				}
			}, func() {
				if _, err := c.Latest("doc"); err != nil {
					sb.Fatal(err)
				}
			})
		})
	}
}

// clockedCollection opens a DB on disk, NoSync, whose clock reads *now,
// and the raw collection the benchmarks of this file write.
func clockedCollection(b *testing.B, now *time.Time) (*tipkv.DB, *versioned.Collection[[]byte]) {
	db, err := tipkv.Open(filepath.Join(b.TempDir(), "db"), &tipkv.Options{NoSync: true, Clock: func() time.Time { return *now }})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	c, err := versioned.NewCollection(db, vbColl, &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(b, err)
	return db, c
}

// timedHistory writes n versions of "doc", one a second from the time it
// returns, into a DB on disk, with the collection's time index when
// indexed, and compacts it.
func timedHistory(b *testing.B, n int, indexed bool) (*versioned.Collection[[]byte], time.Time) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	db, c := clockedCollection(b, &now)
	if indexed {
		require.NoError(b, c.EnableTimeIndex(context.Background()))
	}
	val := make([]byte, vbValueSize)
	for i := range n {
		now = t0.Add(time.Duration(i) * time.Second)
		_, err := c.Put(db, "doc", val)
		require.NoError(b, err)
	}
	require.NoError(b, db.Compact())
	return c, t0
}

// Put with metadata (author, reason and a correlation id, set per write
// with tipkv.WithMetadata, encoded at each call as a service would)
// against Put without, paired, of random documents among 10,000 in one DB
// on disk, NoSync (issue 26: at most 1.15x). The disk cost per version is
// in BENCHMARKS.md.
//
//	go test -run '^$' -bench 'BenchmarkPutMetadata' -benchtime 210000x -count 3 ./versioned/
func BenchmarkPutMetadata(b *testing.B) {
	const n = 10_000
	db, err := tipkv.Open(filepath.Join(b.TempDir(), "db"), &tipkv.Options{NoSync: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	c, err := versioned.NewCollection(db, vbColl, &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(b, err)
	val := make([]byte, vbValueSize)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("document-%07d", i)
		_, err := c.Put(db, ids[i], val)
		require.NoError(b, err)
	}
	rng := rand.New(rand.NewPCG(n, 26))
	m := tipkv.Metadata{Author: "ada@example.com", Reason: "price update from the nightly import", CorrelationID: "req-8f14e45fceea167a"}
	paired.Ratio(b, func() {
		if _, err := c.Put(tipkv.WithMetadata(db, m), ids[rng.IntN(n)], val); err != nil {
			b.Fatal(err)
		}
	}, func() {
		if _, err := c.Put(db, ids[rng.IntN(n)], val); err != nil {
			b.Fatal(err)
		}
	})
}

// Put with the collection's time index on against Put with it off,
// paired: random documents among 10,000 of two collections of one DB on
// disk, NoSync, one with the index. The index costs a second key per
// version in the same batch.
//
//	go test -run '^$' -bench 'BenchmarkPutTimeIndex' -benchtime 210000x -count 3 ./versioned/
func BenchmarkPutTimeIndex(b *testing.B) {
	const n = 10_000
	db, err := tipkv.Open(filepath.Join(b.TempDir(), "db"), &tipkv.Options{NoSync: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	plain, err := versioned.NewCollection(db, "plain", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(b, err)
	indexed, err := versioned.NewCollection(db, "indexed", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	require.NoError(b, err)
	require.NoError(b, indexed.EnableTimeIndex(context.Background()))
	val := make([]byte, vbValueSize)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("document-%07d", i)
		for _, c := range []*versioned.Collection[[]byte]{plain, indexed} {
			_, err := c.Put(db, ids[i], val)
			require.NoError(b, err)
		}
	}
	rng := rand.New(rand.NewPCG(n, 26))
	paired.Ratio(b, func() {
		if _, err := indexed.Put(db, ids[rng.IntN(n)], val); err != nil {
			b.Fatal(err)
		}
	}, func() {
		if _, err := plain.Put(db, ids[rng.IntN(n)], val); err != nil {
			b.Fatal(err)
		}
	})
}

// The whole collection rewound (issue 26: LatestAllAsOf at most 1.3x
// LatestAll over 1,000,000 documents): LatestAllAsOf at a time after every
// version (each document's latest answers: one seek each, as LatestAll)
// and at a time before the last tenth of the documents were written again
// (those need the search by time), against LatestAll of the same first
// 10,000 documents, paired. The store holds docs documents, compacted, on
// disk; -short holds 100,000.
//
//	go test -run '^$' -bench 'BenchmarkRewind' -benchtime 210x -count 3 ./versioned/
func BenchmarkRewind(b *testing.B) {
	docs := 1_000_000
	if testing.Short() {
		docs = 100_000
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	db, c := clockedCollection(b, &now)
	val := make([]byte, vbValueSize)
	write := func(from, step int) {
		for i := from; i < docs; i += 1000 * step {
			require.NoError(b, db.Update(func(w *tipkv.Batch) error {
				for j := i; j < min(i+1000*step, docs); j += step {
					if _, err := c.Put(w, fmt.Sprintf("document-%07d", j), val); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	}
	write(0, 1)
	now = t0.Add(time.Hour)
	middle := now
	now = now.Add(time.Hour)
	write(0, 10) // every tenth document written again
	require.NoError(b, db.Compact())
	after := now.Add(time.Hour)
	const page = 10_000
	q := tipkv.Query{Limit: page}
	count := func(sb *testing.B, seq func(yield func(versioned.Doc[[]byte], error) bool)) {
		k := 0
		for _, err := range seq {
			if err != nil {
				sb.Fatal(err)
			}
			k++
		}
		if k != page {
			sb.Fatalf("%d documents, want %d", k, page)
		}
	}
	for _, at := range []struct {
		name string
		t    time.Time
	}{{"after-all", after}, {"before-rewrites", middle}} {
		b.Run("at="+at.name+"/op=latestallasof/vs=latestall", func(sb *testing.B) {
			paired.Ratio(sb, func() { count(sb, c.LatestAllAsOf(at.t, q)) }, func() { count(sb, c.LatestAll(q)) })
		})
	}
}
