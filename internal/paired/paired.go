// Package paired measures one operation against its baseline in the same
// benchmark run, interleaved, and reports their ratio: the harness of the
// paired benchmarks of versioned, queue and internal/link (BENCHMARKS.md
// gives their commands). The bench module's bench/paired.go does the same
// for the peer comparison; a side module cannot import this one.
package paired

import (
	"math"
	"slices"
	"testing"
	"time"
)

// Rounds is how many rounds Ratio cuts b.N into.
const Rounds = 20

// Ratio measures op against base in the same process, interleaved:
// b.N calls of each, cut into Rounds rounds of one chunk per side, in
// an order that alternates from round to round (op base, base op, ...), so
// that what one side leaves behind (a cache it filled, garbage it made)
// falls on the other alike. A warm-up chunk of each runs first and is not
// counted: each side runs at most max(b.N, Rounds+1) calls in all.
//
// Time is the process's CPU time (user and system, every thread), so that
// other jobs on a busy machine do not stretch one side's chunk; where the
// platform has no such clock it is wall time. A chunk ends when the
// process is next quiet (see quiesce): the flushes, compactions and
// garbage collection a chunk set off are charged to it, not to whichever
// chunk runs next (without this, one flush landing on a chunk moved its
// round's ratio by 2-4x).
//
// It reports, as benchmark metrics:
//
//	ns/op, base-ns/op  the mean cost of one call of each side
//	ratio              op/base: the geometric mean of the per-round ratios
//	ratio-lo, ratio-hi its 95% Student-t interval (on the logarithms)
//	ratio-med          the median per-round ratio
//	ratio-min, -max    the lowest and highest per-round ratio
//	ratio-total        the ratio of the two sides' total times: the one to
//	                   read for writes, whose flushes fall on a few chunks
//
// Below 1 op is cheaper. Run with -benchtime Nx, N a multiple of
// Rounds large enough that a chunk takes milliseconds.
func Ratio(b *testing.B, op, base func()) { RatioN(b, b.N, op, base) }

// RatioN is Ratio with calls calls of each side instead of b.N, for an op
// that does many of b.N's units at once.
func RatioN(b *testing.B, calls int, op, base func()) {
	b.Helper()
	per := max(calls/(Rounds+1), 1) // a round's chunk, and the warm-up
	timed := func(f func(), n int) int64 {
		start := cpuNanos()
		for range n {
			f()
		}
		return quiesce() - start
	}
	b.ResetTimer()
	b.StopTimer()
	timed(op, per)
	timed(base, per)
	var tOp, tBase int64
	logs := make([]float64, 0, Rounds)
	ratios := make([]float64, 0, Rounds)
	for r := range Rounds {
		var a, z int64
		if r%2 == 0 {
			a, z = timed(op, per), timed(base, per)
		} else {
			z, a = timed(base, per), timed(op, per)
		}
		tOp, tBase = tOp+a, tBase+z
		x := float64(max(a, 1)) / float64(max(z, 1))
		ratios = append(ratios, x)
		logs = append(logs, math.Log(x))
	}
	total := float64(per * Rounds)
	gm, lo, hi := logInterval(logs)
	slices.Sort(ratios)
	b.ReportMetric(float64(tOp)/total, "ns/op")
	b.ReportMetric(float64(tBase)/total, "base-ns/op")
	b.ReportMetric(gm, "ratio")
	b.ReportMetric(lo, "ratio-lo")
	b.ReportMetric(hi, "ratio-hi")
	b.ReportMetric((ratios[Rounds/2-1]+ratios[Rounds/2])/2, "ratio-med")
	b.ReportMetric(float64(max(tOp, 1))/float64(max(tBase, 1)), "ratio-total")
	b.ReportMetric(ratios[0], "ratio-min")
	b.ReportMetric(ratios[Rounds-1], "ratio-max")
}

// Quiet windows: quiesce waits for a window of quietWindow in which the
// process used less than a twentieth of it, for at most quietLimit.
const (
	quietWindow = 5 * time.Millisecond
	quietLimit  = 30 * time.Second
)

// quiesce waits until the process has had no background work for a window
// (a flush, a compaction, a garbage collection still running) and returns
// the CPU clock at the start of that window: the end of the chunk that
// just ran, its background work included. The wait is bounded, and skipped
// where the clock is wall time. (bench/paired.go does the same.)
func quiesce() int64 {
	if !cpuClock {
		return cpuNanos()
	}
	t0 := time.Now()
	for {
		c := cpuNanos()
		time.Sleep(quietWindow)
		if cpuNanos()-c < int64(quietWindow)/20 || time.Since(t0) >= quietLimit {
			return c
		}
	}
}

// logInterval returns the geometric mean of the ratios whose logarithms
// are logs, and its 95% Student-t interval (as bench/paired.go does).
func logInterval(logs []float64) (gm, lo, hi float64) {
	n := float64(len(logs))
	m := 0.0
	for _, x := range logs {
		m += x
	}
	m /= n
	ss := 0.0
	for _, x := range logs {
		ss += (x - m) * (x - m)
	}
	hw := t975(len(logs)-1) * math.Sqrt(ss/(n-1)/n)
	return math.Exp(m), math.Exp(m - hw), math.Exp(m + hw)
}

// t975 is the 0.975 quantile of Student's t distribution with df degrees
// of freedom, from a table up to 30 and the normal quantile's 1.96 with
// the first Cornish-Fisher term beyond.
func t975(df int) float64 {
	table := [...]float64{
		12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
		2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
		2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
	}
	if df < 1 {
		return math.NaN()
	}
	if df <= len(table) {
		return table[df-1]
	}
	z := 1.959964
	return z + (z*z*z+z)/(4*float64(df))
}
