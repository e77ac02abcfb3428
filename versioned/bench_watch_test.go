package versioned_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

// BenchmarkWatchPut is issue 30's watch measurement: puts of one document,
// each waiting until a Watch of it delivers it (lock step), on disk
// (NoSync), 3,000 puts a DB. It compares in one process, round by round in
// turn (so a busy machine slows them alike):
//
//	keep=0        no KeepVersions
//	keep=64       KeepVersions 64: every put drops the oldest version
//	keep=64,whole KeepVersions 64, each wake-up finding the oldest
//	              version over the document's whole range (the read
//	              before the fix, behind a knob)
//
// It reports each variant's median microseconds a put and its delivery
// over the last 1,000 puts of a DB (the memtable then holds ~2,900
// dropped versions' tombstones with KeepVersions), the spread (min-max)
// over the rounds in the log, and the ratios to keep=0 of the medians and
// of the minimums (the least disturbed rounds). Run with
// -benchtime 1x: one op is every round.
//
//	go test -run '^$' -bench 'BenchmarkWatchPut' -benchtime 1x ./versioned/
func BenchmarkWatchPut(b *testing.B) {
	const puts, rounds = 3_000, 15
	variants := []struct {
		name  string
		keep  int
		whole bool
	}{{"keep=0", 0, false}, {"keep=64", 64, false}, {"keep=64,whole", 64, true}}
	b.Run(fmt.Sprintf("puts=%d,rounds=%d", puts, rounds), func(b *testing.B) {
		for range b.N {
			last := make([][]float64, len(variants))
			for r := range rounds {
				for k := range variants {
					k := (k + r) % len(variants) // each variant first in turn
					v := variants[k]
					us := watchPutRound(b, v.keep, v.whole, puts)
					last[k] = append(last[k], us)
				}
			}
			base := median(last[0])
			for k, v := range variants {
				m := median(last[k])
				b.Logf("%s: median %.1f us a put and delivery, min %.1f, max %.1f, ratio to keep=0 %.2f (rounds: %.1f)",
					v.name, m, slices.Min(last[k]), slices.Max(last[k]), m/base, last[k])
				b.ReportMetric(m, v.name+"-us/put")
				if k > 0 {
					b.ReportMetric(m/base, v.name+"/keep=0")
					b.ReportMetric(slices.Min(last[k])/slices.Min(last[0]), v.name+"/keep=0-min")
				}
			}
		}
	})
}

// watchPutRound opens a DB, watches one document and writes puts versions
// of it in lock step with the watcher; it returns the mean microseconds a
// put and its delivery over the last 1,000.
func watchPutRound(b *testing.B, keep int, whole bool, puts int) float64 {
	defer versioned.SetWatchWholeRange(whole)()
	db, err := tipkv.Open(b.TempDir(), &tipkv.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}()
	c, err := versioned.NewCollection(db, "docs", &versioned.Options[[]byte]{Codec: codec.Raw{}, KeepVersions: keep})
	if err != nil {
		b.Fatal(err)
	}
	next, stop := startWatch(b, c)
	defer stop()
	var start time.Time
	watchLockStep(b, c, db, next, puts, func(i int) {
		if i == puts-1_000 {
			start = time.Now()
		}
	})
	return float64(time.Since(start).Nanoseconds()) / 1e3 / 1_000
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}
