package etcdkv_test

import (
	"slices"
	"testing"
	"time"
)

// pairedAs runs op and base in ten interleaved chunks, alternating which
// goes first, b.N calls of each in all; every call returns the time it
// stands for. It reports each side's p50 and p99 (ms), the means (ns/op
// and <name>-ns/op), the ratio of the p50s (op/base) and, as its spread,
// the lowest and highest ratio of the per-chunk medians. It is sqlkv's
// helper of the same name (a test file of another module, so copied):
// the two engines' figures are made the same way.
func pairedAs(b *testing.B, name string, op, base func(i int) time.Duration) (tOp, tBase []time.Duration) {
	b.Helper()
	const chunks = 10
	per := max(b.N/chunks, 1)
	var ratios []float64
	n := 0
	timed := func(f func(int) time.Duration, into *[]time.Duration) time.Duration {
		var ds []time.Duration
		for range per {
			ds = append(ds, f(n))
			n++
		}
		*into = append(*into, ds...)
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	b.ResetTimer()
	for c := range chunks {
		var a, z time.Duration
		if c%2 == 0 {
			a, z = timed(op, &tOp), timed(base, &tBase)
		} else {
			z, a = timed(base, &tBase), timed(op, &tOp)
		}
		ratios = append(ratios, float64(a)/float64(z))
	}
	b.StopTimer()
	slices.Sort(tOp)
	slices.Sort(tBase)
	slices.Sort(ratios)
	b.ReportMetric(meanNs(tOp), "ns/op")
	b.ReportMetric(meanNs(tBase), name+"-ns/op")
	b.ReportMetric(pctMs(tOp, 0.5), "p50-ms")
	b.ReportMetric(pctMs(tOp, 0.99), "p99-ms")
	b.ReportMetric(pctMs(tBase, 0.5), name+"-p50-ms")
	b.ReportMetric(pctMs(tBase, 0.99), name+"-p99-ms")
	b.ReportMetric(float64(pct(tOp, 0.5))/float64(pct(tBase, 0.5)), "ratio")
	b.ReportMetric(ratios[0], "ratio-min")
	b.ReportMetric(ratios[len(ratios)-1], "ratio-max")
	return tOp, tBase
}

// pct is the p-th quantile of ds, which is sorted.
func pct(ds []time.Duration, p float64) time.Duration { return ds[int(p*float64(len(ds)-1))] }

// pctMs is pct in milliseconds.
func pctMs(ds []time.Duration, p float64) float64 { return float64(pct(ds, p)) / 1e6 }

// meanNs is the mean of ds in nanoseconds.
func meanNs(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Nanoseconds()) / float64(len(ds))
}
