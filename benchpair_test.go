package tipkv_test

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

func itoa(n int) string { return strconv.Itoa(n) }

// pairedRatio runs op and base in interleaved chunks, in alternating order
// (op base, base op, ...), b.N calls of each in all, so that both see the
// same machine, and reports their costs and the ratio op/base: the median
// of the per-chunk ratios, with the lowest and highest as its spread. The
// ns/op Go prints is of op alone.
func pairedRatio(b *testing.B, op, base func()) {
	b.Helper()
	const chunks = 16
	per := max(b.N/chunks, 1)
	var tOp, tBase time.Duration
	var ratios []float64
	timed := func(f func()) time.Duration {
		start := time.Now()
		for range per {
			f()
		}
		return time.Since(start)
	}
	b.ResetTimer()
	b.StopTimer()
	for c := range chunks {
		var a, z time.Duration
		if c%2 == 0 {
			a, z = timed(op), timed(base)
		} else {
			z, a = timed(base), timed(op)
		}
		tOp, tBase = tOp+a, tBase+z
		ratios = append(ratios, float64(a)/float64(z))
	}
	slices.Sort(ratios)
	calls := float64(per * chunks)
	b.ReportMetric(float64(tOp.Nanoseconds())/calls, "ns/op")
	b.ReportMetric(float64(tBase.Nanoseconds())/calls, "base-ns/op")
	b.ReportMetric((ratios[chunks/2-1]+ratios[chunks/2])/2, "ratio")
	b.ReportMetric(ratios[0], "ratio-min")
	b.ReportMetric(ratios[chunks-1], "ratio-max")
}
