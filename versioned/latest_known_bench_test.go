package versioned_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/paired"
	"github.com/tipkv/tipkv/versioned"
)

// Latest of documents this DB wrote (their latest version known to the
// version cache: a point Get) against a Get of the same keys through the
// storage seam, in alternating chunks: tipkv's own cost above the engine's
// Get. The tables stay in the block cache, so the figure is CPU only. The
// root package's BenchmarkVersions/op=latest-known pairs it with raw
// Pebble on disk.
func BenchmarkLatestKnown(b *testing.B) {
	b.Run("op=latest-known/pair=store-get", func(b *testing.B) { benchLatestKnown(b, lkWrote) })
	// The documents were written before the DB was opened, and read twice
	// since: the second reads taught the version cache their latest
	// versions.
	b.Run("op=latest-learnt/pair=store-get", func(b *testing.B) { benchLatestKnown(b, lkLearnt) })
	// AsOf of the latest version: the prefix seek Latest made before.
	b.Run("op=asof-latest/pair=store-get", func(b *testing.B) { benchLatestKnown(b, lkSeek) })
	// With Options.ValueCache: the decoded latest version from memory,
	// on a store this DB wrote and on one it only reopened and read.
	b.Run("op=latest-cached/pair=store-get", func(b *testing.B) { benchLatestKnown(b, lkCached) })
	b.Run("op=latest-cached-learnt/pair=store-get", func(b *testing.B) { benchLatestKnown(b, lkCachedLearnt) })
}

const (
	lkWrote = iota
	lkLearnt
	lkSeek
	lkCached
	lkCachedLearnt
)

func benchLatestKnown(b *testing.B, mode int) {
	dir := b.TempDir()
	db, err := tipkv.Open(dir, &tipkv.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	opts := &versioned.Options[[]byte]{Codec: codec.Raw{}}
	if mode == lkCached || mode == lkCachedLearnt {
		opts.ValueCache = 64 << 20
	}
	c, err := versioned.NewCollection(db, "docs", opts)
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 100)
	ids := make([]string, 1000)
	keys := make([][]byte, len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("doc-%04d", i)
		for range 5 {
			if _, err := c.Put(db, ids[i], val); err != nil {
				b.Fatal(err)
			}
		}
		keys[i] = codec.AppendDesc(codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "docs"), ids[i]), 5)
	}
	if mode == lkLearnt || mode == lkCachedLearnt {
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		if db, err = tipkv.Open(dir, &tipkv.Options{NoSync: true}); err != nil {
			b.Fatal(err)
		}
		if c, err = versioned.NewCollection(db, "docs", opts); err != nil {
			b.Fatal(err)
		}
		for range 2 { // a document is learnt at its second miss
			for _, id := range ids {
				if _, err := c.Latest(id); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	s, err := link.StoreOf(db)
	if err != nil {
		b.Fatal(err)
	}
	seek := mode == lkSeek
	stored := len(val) + docfmt.HeaderSize // the version's header: its commit time
	var tOurs, tBase time.Duration
	const chunk = 64
	b.ReportAllocs()
	b.ResetTimer()
	for i, k := 0, 0; i < b.N; i, k = i+chunk, k+1 {
		n := min(chunk, b.N-i)
		ours := func() {
			start := time.Now()
			for j := i; j < i+n; j++ {
				var d versioned.Doc[[]byte]
				var err error
				if seek {
					d, err = c.AsOf(ids[j%len(ids)], 5)
				} else {
					d, err = c.Latest(ids[j%len(ids)])
				}
				if err != nil || d.Version != 5 {
					b.Fatal(d.Version, err)
				}
			}
			tOurs += time.Since(start)
		}
		base := func() {
			start := time.Now()
			for j := i; j < i+n; j++ {
				v, err := s.Get(keys[(j+500)%len(keys)])
				if err != nil || len(v) != stored {
					b.Fatal(err)
				}
			}
			tBase += time.Since(start)
		}
		if k%2 == 0 {
			ours()
			base()
		} else {
			base()
			ours()
		}
	}
	b.ReportMetric(float64(tOurs)/float64(tBase), "ratio")
	b.ReportMetric(float64(tBase.Nanoseconds())/float64(b.N), "base-ns/op")
}

// What learning costs a cold read (issue 30): Latest of uniformly random
// documents among 200,000, more than the version cache holds (its
// default 65,536 entries, two generations), so most reads miss it, seek,
// and teach it the version (an entry made, another forgotten), against
// the same reads with learning off (knobs.Versioned.NoLearn), in
// alternating chunks in one process (internal/paired, CPU time).
//
//	go test -run '^$' -bench 'BenchmarkLatestCold' -benchtime 200000x -count 3 ./versioned/
func BenchmarkLatestCold(b *testing.B) {
	const n = 200_000
	db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 100)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("doc-%07d", i)
	}
	for i := 0; i < n; i += 1000 {
		err := db.Update(func(w *tipkv.Batch) error {
			for _, id := range ids[i:min(i+1000, n)] {
				if _, err := c.Put(w, id, val); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	// Reopened: the cache knows nothing; the tables are compacted.
	if err := db.Compact(); err != nil {
		b.Fatal(err)
	}
	dir := db.Dir()
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if db, err = tipkv.Open(dir, &tipkv.Options{NoSync: true}); err != nil {
		b.Fatal(err)
	}
	if c, err = versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}}); err != nil {
		b.Fatal(err)
	}
	defer func() { knobs.Versioned.NoLearn = false }()
	rngA, rngB := rand.New(rand.NewPCG(1, 1)), rand.New(rand.NewPCG(2, 2))
	read := func(rng *rand.Rand, learn bool) {
		knobs.Versioned.NoLearn = !learn
		if d, err := c.Latest(ids[rng.IntN(n)]); err != nil || d.Version != 1 {
			b.Fatal(d.Version, err)
		}
	}
	paired.Ratio(b, func() { read(rngA, true) }, func() { read(rngB, false) })
}
