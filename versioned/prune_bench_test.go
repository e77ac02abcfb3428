package versioned_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

// BenchmarkPruneLoop is the loop of issue 16: Put, Prune(keep 3) and
// Latest of one document, over and over, on disk (NoSync). Each Prune
// drops one version. delete=range forces one range delete a Prune (the
// old behaviour, the baseline); delete=point is what Prune does. Besides
// ns/op it reports the cost of an iteration over the first and the last
// 1,000 and their ratio: flat is about 1. Run with -benchtime 1x: one
// loop is one op.
//
//	go test -run '^$' -bench 'BenchmarkPruneLoop' -benchtime 1x ./versioned/
func BenchmarkPruneLoop(b *testing.B) {
	for _, tc := range []struct {
		del   string
		iters int
	}{{"range", 5_000}, {"point", 5_000}, {"point", 50_000}} {
		b.Run(fmt.Sprintf("iters=%d,delete=%s", tc.iters, tc.del), func(b *testing.B) {
			if tc.del == "range" {
				defer versioned.SetDropRangeMin(1)()
			}
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				first, last := pruneLoop(b, c, db, tc.iters)
				b.StopTimer()
				b.ReportMetric(first, "first1k-us/iter")
				b.ReportMetric(last, "last1k-us/iter")
				b.ReportMetric(last/first, "last/first")
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// pruneLoop runs iters rounds of Put, Prune(keep 3) and Latest and returns
// the mean microseconds of a round over the first and the last 1,000.
func pruneLoop(tb testing.TB, c *versioned.Collection[[]byte], db *tipkv.DB, iters int) (first, last float64) {
	val := make([]byte, 100)
	var start time.Time
	for i := range iters {
		if i == 0 || i == iters-1000 {
			start = time.Now()
		}
		v, err := c.Put(db, "doc", val)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := c.Prune(db, "doc", 3); err != nil {
			tb.Fatal(err)
		}
		d, err := c.Latest("doc")
		if err != nil || d.Version != v {
			tb.Fatalf("Latest: %v, version %d, want %d", err, d.Version, v)
		}
		if i == 999 {
			first = float64(time.Since(start).Microseconds()) / 1000
		}
		if i == iters-1 {
			last = float64(time.Since(start).Microseconds()) / 1000
		}
	}
	return first, last
}

// BenchmarkPruneRuns measures where point deletes stop paying: rounds of
// drop Puts then Prune(keep 3), which drops drop versions, and a read of
// the document, until 20,000 versions are dropped; the cost is reported
// per version written. read=latest reads the latest version (point
// tombstones sit below it, never on its path); read=history reads the whole
// history and read=count counts it, which step over every point tombstone
// not yet compacted away, so they are the case against point deletes. It
// is why knobs.Versioned.DropRangeMin is what it is.
//
//	go test -run '^$' -bench 'BenchmarkPruneRuns' -benchtime 1x -count 3 ./versioned/
func BenchmarkPruneRuns(b *testing.B) {
	const total = 20_000
	for _, read := range []string{"latest", "history", "count"} {
		for _, drop := range []int{5, 20, 32, 50, 64, 100, 250} {
			for _, del := range []string{"range", "point"} {
				b.Run(fmt.Sprintf("read=%s,drop=%d,delete=%s", read, drop, del), func(b *testing.B) {
					min := math.MaxInt
					if del == "range" {
						min = 1
					}
					defer versioned.SetDropRangeMin(min)()
					val := make([]byte, 100)
					b.ReportAllocs()
					for range b.N {
						b.StopTimer()
						db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
						if err != nil {
							b.Fatal(err)
						}
						c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}})
						if err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						for range total / drop {
							for range drop {
								if _, err := c.Put(db, "doc", val); err != nil {
									b.Fatal(err)
								}
							}
							if _, err := c.Prune(db, "doc", 3); err != nil {
								b.Fatal(err)
							}
							switch read {
							case "latest":
								_, err = c.Latest("doc")
							case "history":
								for _, e := range c.History("doc", tipkv.Query{}) {
									err = e
								}
							case "count":
								_, err = c.Count("doc")
							}
							if err != nil {
								b.Fatal(err)
							}
						}
						b.StopTimer()
						if err := db.Close(); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/version")
				})
			}
		}
	}
}
