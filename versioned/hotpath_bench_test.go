package versioned_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

// BenchmarkHotPath times the calls whose exclusive-mode (Pebble) cost the
// shared-engine work must not change: the gate is within 3% of the same
// file built on the code before. It uses the public API only, so that the
// very same file builds on both; run the two test binaries interleaved:
//
//	go test -c -o new.test ./versioned/   (and old.test from the old tree)
//	for i in 1 2 3 4 5 6 7 8; do
//	  for b in old new; do ./$b.test -test.run '^$' -test.bench BenchmarkHotPath -test.benchtime 20000x >> $b.txt; done
//	done
//
// In memory with NoSync, so that what is timed is tipkv's own work, not
// the disk's.
func BenchmarkHotPath(b *testing.B) {
	open := func(b *testing.B) (*tipkv.DB, *versioned.Collection[[]byte], *versioned.Feed[[]byte]) {
		db, err := tipkv.Open("", &tipkv.Options{InMemory: true, NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = db.Close() })
		c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
		if err != nil {
			b.Fatal(err)
		}
		t := time.Unix(1_700_000_000, 0)
		f, err := versioned.NewFeed(db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}, Clock: func() time.Time { return t }})
		if err != nil {
			b.Fatal(err)
		}
		return db, c, f
	}
	val := make([]byte, 100)
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("doc-%04d", i)
	}
	fill := func(b *testing.B, db *tipkv.DB, c *versioned.Collection[[]byte], versions int) {
		for _, id := range ids {
			for range versions {
				if _, err := c.Put(db, id, val); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	check := func(b *testing.B, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}

	b.Run("op=put", func(b *testing.B) {
		db, c, _ := open(b)
		b.ReportAllocs()
		for i := range b.N {
			_, err := c.Put(db, ids[i%len(ids)], val)
			check(b, err)
		}
	})
	b.Run("op=put-if", func(b *testing.B) {
		db, c, _ := open(b)
		vs := make([]int64, len(ids))
		b.ReportAllocs()
		for i := range b.N {
			j := i % len(ids)
			v, err := c.PutIf(db, ids[j], val, vs[j])
			check(b, err)
			vs[j] = v
		}
	})
	b.Run("op=update-3-puts", func(b *testing.B) {
		db, c, _ := open(b)
		b.ReportAllocs()
		for i := range b.N {
			check(b, db.Update(func(bt *tipkv.Batch) error {
				for k := range 3 {
					if _, err := c.Put(bt, ids[(i*3+k)%len(ids)], val); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	})
	b.Run("op=put-prune", func(b *testing.B) {
		db, c, _ := open(b)
		b.ReportAllocs()
		for i := range b.N {
			id := ids[i%len(ids)]
			_, err := c.Put(db, id, val)
			check(b, err)
			_, err = c.Prune(db, id, 3)
			check(b, err)
		}
	})
	b.Run("op=delete-put", func(b *testing.B) {
		db, c, _ := open(b)
		b.ReportAllocs()
		for i := range b.N {
			id := ids[i%len(ids)]
			_, err := c.Delete(db, id)
			check(b, err)
			_, err = c.Put(db, id, val)
			check(b, err)
		}
	})
	b.Run("op=latest", func(b *testing.B) {
		db, c, _ := open(b)
		fill(b, db, c, 5)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			_, err := c.Latest(ids[i%len(ids)])
			check(b, err)
		}
	})
	b.Run("op=latest-missing", func(b *testing.B) {
		db, c, _ := open(b)
		fill(b, db, c, 1)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			_, err := c.Latest("missing-" + ids[i%len(ids)])
			if err == nil {
				b.Fatal("found")
			}
		}
	})
	b.Run("op=history-10", func(b *testing.B) {
		db, c, _ := open(b)
		fill(b, db, c, 20)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			n := 0
			for _, err := range c.History(ids[i%len(ids)], tipkv.Query{Limit: 10}) {
				check(b, err)
				n++
			}
			if n != 10 {
				b.Fatal(n)
			}
		}
	})
	b.Run("op=latest-many-10", func(b *testing.B) {
		db, c, _ := open(b)
		fill(b, db, c, 3)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			j := (i * 10) % (len(ids) - 10)
			_, err := c.LatestMany(ids[j : j+10]...)
			check(b, err)
		}
	})
	b.Run("op=append", func(b *testing.B) {
		db, _, f := open(b)
		b.ReportAllocs()
		for i := range b.N {
			_, err := f.Append(db, ids[i%16], val)
			check(b, err)
		}
	})
	b.Run("op=append-trim", func(b *testing.B) {
		db, _, f := open(b)
		b.ReportAllocs()
		for i := range b.N {
			s := ids[i%16]
			_, err := f.Append(db, s, val)
			check(b, err)
			check(b, f.Trim(db, s, 3))
		}
	})
	b.Run("op=newest-10", func(b *testing.B) {
		db, _, f := open(b)
		for i := range 16 * 20 {
			_, err := f.Append(db, ids[i%16], val)
			check(b, err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			n := 0
			for _, err := range f.Newest(ids[i%16], tipkv.Query{Limit: 10}) {
				check(b, err)
				n++
			}
			if n != 10 {
				b.Fatal(n)
			}
		}
	})
}
