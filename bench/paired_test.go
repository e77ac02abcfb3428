package main

import (
	"math"
	"slices"
	"testing"
)

func TestOrdersBalance(t *testing.T) {
	for k := 2; k <= 3; k++ {
		ords := orders(k)
		pos := map[[2]int]int{}  // system, position -> count
		next := map[[2]int]int{} // system, the one right after it -> count
		for b := 0; b < len(ords); b += k {
			seen := map[[2]int]bool{}
			for _, o := range ords[b : b+k] {
				for p, s := range o {
					if seen[[2]int{s, p}] {
						t.Errorf("k=%d: block at %d runs %d at position %d twice", k, b, s, p)
					}
					seen[[2]int{s, p}] = true
					pos[[2]int{s, p}]++
					if p+1 < k {
						next[[2]int{s, o[p+1]}]++
					}
				}
			}
		}
		for s := range k {
			for u := range k {
				if s != u && next[[2]int{s, u}] != next[[2]int{0, 1}] {
					t.Errorf("k=%d: %d runs right after %d %d times, 1 after 0 %d times", k, u, s, next[[2]int{s, u}], next[[2]int{0, 1}])
				}
			}
		}
	}
}

func TestLogInterval(t *testing.T) {
	// Ratios 0.5, 1, 2: geometric mean 1; sd of the logs is ln 2, so the
	// half-width is t(2) * ln2 / sqrt(3).
	e := logInterval([]float64{math.Log(0.5), 0, math.Log(2)})
	hw := 4.302653 * math.Ln2 / math.Sqrt(3)
	if math.Abs(e.ratio-1) > 1e-12 || math.Abs(e.lo-math.Exp(-hw)) > 1e-9 || math.Abs(e.hi-math.Exp(hw)) > 1e-9 || e.n != 3 {
		t.Errorf("got %+v, want 1 [%g, %g]", e, math.Exp(-hw), math.Exp(hw))
	}
	if got := logInterval([]float64{math.Log(3)}); math.Abs(got.ratio-3) > 1e-12 || !math.IsNaN(got.lo) || !math.IsInf(got.halfWidth(), 1) {
		t.Errorf("one ratio: %+v", got)
	}
}

func TestTotalsInterval(t *testing.T) {
	// tipkv takes 10 in every round but one, where a flush makes it 100;
	// the peer takes 20 throughout. The ratio of totals charges the flush:
	// 170/160; the geometric mean of the per-round ratios would not.
	a := []float64{10, 10, 10, 10, 10, 10, 10, 100}
	b := []float64{20, 20, 20, 20, 20, 20, 20, 20}
	e := totalsInterval(a, b)
	if math.Abs(e.ratio-170.0/160) > 1e-12 || !(e.lo < e.ratio && e.ratio < e.hi) || e.n != 8 {
		t.Errorf("got %+v, want %g inside its interval", e, 170.0/160)
	}
	if g := logInterval(logRatios(a, b)); g.ratio > 0.8 {
		t.Errorf("geometric mean %g: expected it to discount the burst", g.ratio)
	}
	// Proportional rounds: no spread, no width.
	e = totalsInterval([]float64{1, 2, 3}, []float64{2, 4, 6})
	if e.ratio != 0.5 || e.lo != 0.5 || e.hi != 0.5 {
		t.Errorf("proportional: %+v", e)
	}
}

func logRatios(a, b []float64) []float64 {
	var out []float64
	for i := range a {
		out = append(out, math.Log(a[i]/b[i]))
	}
	return out
}

func TestTQuantile(t *testing.T) {
	// R: qt(0.975, c(30, 31, 40, 60, 120, 1000))
	for df, want := range map[int]float64{30: 2.042272, 31: 2.039513, 40: 2.021075, 60: 2.000298, 120: 1.979930, 1000: 1.962339} {
		if got := tQuantile975(df); math.Abs(got-want) > 2e-4 {
			t.Errorf("df %d: %g, want %g", df, got, want)
		}
	}
}

// TestRunPairedStops checks the stopping rule: a row whose ratio never
// varies stops at the minimum; one whose ratio varies a lot stops at the
// cap and says so.
func TestRunPairedStops(t *testing.T) {
	steady := []side{
		{sysTipkv, func() (float64, error) { return 100, nil }},
		{sysBadger, func() (float64, error) { return 200, nil }},
	}
	r, err := runPaired(steady, plan{minRounds: 4, maxRounds: 20, maxTime: 1e9, target: 0.05})
	if err != nil || r.rounds != 4 || r.capped || r.ratio(sysBadger).ratio != 0.5 {
		t.Errorf("steady: %d rounds, capped %v, ratio %v, %v", r.rounds, r.capped, r.ratio(sysBadger), err)
	}
	i := 0
	noisy := []side{
		{sysTipkv, func() (float64, error) { i++; return float64(100 + 90*(i%2)), nil }},
		{sysBadger, func() (float64, error) { return 100, nil }},
	}
	r, err = runPaired(noisy, plan{minRounds: 4, maxRounds: 12, maxTime: 1e9, target: 0.05})
	if err != nil || r.rounds != 12 || !r.capped {
		t.Errorf("noisy: %d rounds, capped %v, %v", r.rounds, r.capped, err)
	}
	r, err = runPaired(steady, fixedPlan(7))
	if err != nil || r.rounds != 7 || r.capped || !r.totals || r.value(sysTipkv) != 100 {
		t.Errorf("fixed: %d rounds, capped %v, totals %v, %v", r.rounds, r.capped, r.totals, err)
	}
}

func TestFmtRatio(t *testing.T) {
	for r, want := range map[float64]string{0.731: "0.73", 1.5: "1.50", 12.34: "12.3", 0.05: "1/20", 1.0 / 6712: "1/6,700", 0.1: "0.10"} {
		if got := fmtRatio(r); got != want {
			t.Errorf("fmtRatio(%g) = %s, want %s", r, got, want)
		}
	}
	lo, hi := quartiles([]float64{4, 1, 3, 2, 5})
	if lo != 2 || hi != 4 || !slices.Equal([]float64{median([]float64{3, 1, 2})}, []float64{2}) {
		t.Errorf("quartiles %g %g", lo, hi)
	}
}

// TestPairRenames: a pair of a run's sides is a two-column row whose
// ratio is the two sides' own, whatever else ran in the same rounds.
func TestPairRenames(t *testing.T) {
	r := &paired{systems: []string{"a", "b", "c"}, totals: true, rounds: 3, times: map[string][]float64{
		"a": {10, 12, 14}, "b": {40, 40, 40}, "c": {20, 24, 28},
	}}
	p := r.pair("c", "a", "tipkv", "peer")
	if !slices.Equal(p.systems, []string{"tipkv", "peer"}) || p.rounds != 3 || !p.totals {
		t.Fatalf("pair: systems %v, rounds %d, totals %v", p.systems, p.rounds, p.totals)
	}
	if e := p.ratio("peer"); math.Abs(e.ratio-2) > 1e-12 {
		t.Errorf("tipkv/peer = %v, want 2 (c over a)", e)
	}
	if got := r.pair("b", "c", "", "").ratio("c"); math.Abs(got.ratio-120.0/72) > 1e-12 {
		t.Errorf("b/c = %v, want %g", got, 120.0/72)
	}
	if len(r.systems) != 3 || len(r.times) != 3 {
		t.Errorf("pair changed the run it was taken from: %v", r.systems)
	}
}
