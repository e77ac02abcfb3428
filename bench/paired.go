package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Every timed row of the comparison runs through runPaired. The row is cut
// into chunks; a round runs one chunk per system, in an order that rotates
// from round to round. Load on the machine that changes from second to
// second then lands on every side of a ratio alike, and the spread from
// round to round says how far the row can be trusted.
//
// What a row reports depends on what it measures:
//
//   - A read costs about the same every time; what varies from chunk to
//     chunk is the machine and the garbage collector, which serves the
//     whole process (every store's heap), so one cycle landing in one
//     chunk is noise, not the read's cost. A read row reports the
//     geometric mean of the per-round ratios tipkv/peer, with a 95%
//     Student-t interval on their logarithms, and the median time of each
//     system: one odd chunk cannot move it.
//   - A write's cost comes in bursts: a flush every so many commits, a
//     compaction now and then, and the burst is part of the cost. A write
//     row reports the ratio of the total times (the mean per item over the
//     rounds, each system's bursts included in full), with a 95% t-interval
//     from the linearised variance of that ratio (the delta method) on the
//     log scale, and the mean time of each system.
//
// A row stops once every peer's interval is within plan.target of its
// ratio (after at least plan.minRounds), or at the plan's cap on rounds or
// time, and then says so. The rule is checked only after whole cycles of
// orders (see orders), so every order has run equally often.

// A side is one system's part of a paired row.
type side struct {
	system string
	// chunk runs the system's next chunk of the row and returns its time
	// per operation, background work included (see timeChunk).
	chunk func() (float64, error)
}

// A plan says how long a paired row runs.
type plan struct {
	minRounds int
	maxRounds int
	maxTime   time.Duration // checked between cycles of orders
	// target is the half-width of a 95% interval, relative to its ratio,
	// at which the row may stop: 0.05 stops once every ratio is known to
	// +-5%. 0 runs exactly maxRounds (rows whose work is fixed: a load,
	// the churn test).
	target float64
	// totals makes the row report the ratio of total times, for writes;
	// otherwise it reports the geometric mean of the per-round ratios.
	totals bool
}

// most returns the most rounds p runs for k systems: maxRounds, rounded up
// to whole cycles of orders when the plan has a target.
func (p plan) most(k int) int {
	if p.target == 0 {
		return p.maxRounds
	}
	c := len(orders(k))
	return (p.maxRounds + c - 1) / c * c
}

// fixedPlan runs exactly n rounds of a write whose amount is fixed.
func fixedPlan(n int) plan { return plan{minRounds: n, maxRounds: n, totals: true} }

// A paired is what a row measured: every system's time per operation in
// each round, in round order.
type paired struct {
	systems []string // systems[0] is tipkv, the numerator of every ratio
	times   map[string][]float64
	rounds  int
	capped  bool // stopped at the cap before the target was reached
	totals  bool // ratio of totals (writes), not the geometric mean of per-round ratios (reads)
	wall    time.Duration
	windows float64 // quiet windows per chunk: 1 when nothing ran in the background
}

// orders returns the sequence of orders that rounds cycle through for k
// systems: the cyclic Latin square of 0..k-1, then the one of its reverse.
// Within every block of k rounds each system runs once in each position;
// over the 2k rounds each system runs once right after each other system
// for k <= 3, so what one system leaves behind (a cache it filled, garbage
// it made) falls on every other one alike.
func orders(k int) [][]int {
	var out [][]int
	for _, rev := range []bool{false, true} {
		for r := range k {
			o := make([]int, k)
			for i := range k {
				s := (i + r) % k
				if rev {
					s = k - 1 - s
				}
				o[i] = s
			}
			out = append(out, o)
		}
	}
	return out
}

// runPaired runs rounds of sides' chunks until p says stop. sides[0] must be
// tipkv.
func runPaired(sides []side, p plan) (*paired, error) {
	res := &paired{times: map[string][]float64{}, totals: p.totals}
	for _, s := range sides {
		res.systems = append(res.systems, s.system)
	}
	ords := orders(len(sides))
	t0 := time.Now()
	quiet = quietStats{}
	for {
		o := ords[res.rounds%len(ords)]
		for _, i := range o {
			ns, err := sides[i].chunk()
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", sides[i].system, res.rounds+1, err)
			}
			res.times[sides[i].system] = append(res.times[sides[i].system], ns)
		}
		res.rounds++
		if p.target == 0 {
			if res.rounds >= p.maxRounds {
				break
			}
			continue
		}
		if res.rounds%len(ords) != 0 || res.rounds < p.minRounds {
			continue // stop only after whole cycles of the orders
		}
		if res.precise(p.target) {
			break
		}
		if res.rounds >= p.maxRounds || time.Since(t0) >= p.maxTime {
			res.capped = true
			break
		}
	}
	res.wall = time.Since(t0)
	res.windows = float64(quiet.windows) / float64(max(quiet.chunks, 1))
	return res, nil
}

// only returns the measurements of systems alone, in that order.
func (r *paired) only(systems ...string) *paired {
	out := *r
	out.systems = systems
	out.times = map[string][]float64{}
	for _, s := range systems {
		out.times[s] = r.times[s]
	}
	return &out
}

// pair returns r's measurements of systems a and b alone, a the
// numerator, renamed as and bs where those are not empty (so that they
// land in a table's tipkv and peer columns).
func (r *paired) pair(a, b, as, bs string) *paired {
	out := *r
	as, bs = cmp.Or(as, a), cmp.Or(bs, b)
	out.systems = []string{as, bs}
	out.times = map[string][]float64{as: r.times[a], bs: r.times[b]}
	return &out
}

// precise reports whether every peer's interval is within target of its
// ratio.
func (r *paired) precise(target float64) bool {
	for _, s := range r.systems[1:] {
		if e := r.ratio(s); !(e.halfWidth() <= target) {
			return false
		}
	}
	return true
}

// value returns the system's time per operation over the rounds: the
// mean for a write row, the median for a read row.
func (r *paired) value(system string) float64 {
	if r.totals {
		return mean(r.times[system])
	}
	return median(r.times[system])
}

// ratio estimates tipkv's time over the peer's.
func (r *paired) ratio(peer string) estimate {
	a, b := r.times[r.systems[0]], r.times[peer]
	n := min(len(a), len(b))
	if r.totals {
		return totalsInterval(a[:n], b[:n])
	}
	logs := make([]float64, 0, n)
	for i := range n {
		logs = append(logs, math.Log(max(a[i], 1e-3)/max(b[i], 1e-3)))
	}
	return logInterval(logs)
}

// An estimate is a ratio and its 95% interval, [lo, hi]; lo and hi are NaN
// when there was only one measurement.
type estimate struct {
	ratio, lo, hi float64
	n             int
}

// plain is a ratio with no interval: one measurement on each side.
func plain(ratio float64) estimate {
	return estimate{ratio: ratio, lo: math.NaN(), hi: math.NaN(), n: 1}
}

// halfWidth is the interval's half-width on the log scale, as a fraction of
// the ratio: 0.05 for an interval of about +-5%. It is +Inf without one.
func (e estimate) halfWidth() float64 {
	if math.IsNaN(e.lo) {
		return math.Inf(1)
	}
	return math.Sqrt(e.hi/e.lo) - 1
}

// logInterval returns the geometric mean of the ratios whose logarithms are
// logs, with a 95% Student-t interval.
func logInterval(logs []float64) estimate {
	n := len(logs)
	if n == 0 {
		return estimate{ratio: math.NaN(), lo: math.NaN(), hi: math.NaN()}
	}
	mean := 0.0
	for _, x := range logs {
		mean += x
	}
	mean /= float64(n)
	if n == 1 {
		return estimate{ratio: math.Exp(mean), lo: math.NaN(), hi: math.NaN(), n: 1}
	}
	ss := 0.0
	for _, x := range logs {
		ss += (x - mean) * (x - mean)
	}
	hw := tQuantile975(n-1) * math.Sqrt(ss/float64(n-1)/float64(n))
	return estimate{ratio: math.Exp(mean), lo: math.Exp(mean - hw), hi: math.Exp(mean + hw), n: n}
}

// totalsInterval returns mean(a)/mean(b) for paired rounds a and b, with a
// 95% interval: the delta method gives the ratio's standard error as the
// standard deviation of a[i] - R*b[i] over sqrt(n)*mean(b); the interval is
// taken on the log scale, so that it stays above 0 and reads the same
// either way up.
func totalsInterval(a, b []float64) estimate {
	n := len(a)
	if n == 0 {
		return estimate{ratio: math.NaN(), lo: math.NaN(), hi: math.NaN()}
	}
	r := mean(a) / mean(b)
	if n == 1 {
		return estimate{ratio: r, lo: math.NaN(), hi: math.NaN(), n: 1}
	}
	ss := 0.0
	for i := range a {
		d := a[i] - r*b[i]
		ss += d * d
	}
	se := math.Sqrt(ss/float64(n-1)) / (math.Sqrt(float64(n)) * mean(b)) / r
	hw := tQuantile975(n-1) * se
	return estimate{ratio: r, lo: r * math.Exp(-hw), hi: r * math.Exp(hw), n: n}
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// t975 holds the 0.975 quantiles of Student's t distribution for 1 to 30
// degrees of freedom.
var t975 = [...]float64{
	12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
	2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
	2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
}

// tQuantile975 returns the 0.975 quantile of Student's t distribution with
// df degrees of freedom: the table up to 30, then the Cornish-Fisher
// expansion around the normal quantile, good to 1e-4 from there on.
func tQuantile975(df int) float64 {
	if df <= len(t975) {
		return t975[df-1]
	}
	z, v := 1.959964, float64(df)
	return z + (z*z*z+z)/(4*v) + (5*math.Pow(z, 5)+16*z*z*z+3*z)/(96*v*v) +
		(3*math.Pow(z, 7)+19*math.Pow(z, 5)+17*z*z*z-15*z)/(384*v*v*v)
}

// timeChunk runs body, which performs some operations and returns how many,
// then waits until the process has had no background work for a window
// (flushes, compactions, a garbage collection the body started) and returns
// the clock's time per operation from the start of body to the start of
// that quiet window. The work a chunk sets off is thus charged to the
// system that set it off, not to whichever system runs next. A window of 0
// does not wait. wall selects wall time whatever the -wall flag says.
func timeChunk(body func() (int, error), window time.Duration, wall bool) (float64, error) {
	now := clock
	if wall {
		now = wallNanos
	}
	c0 := now()
	n, err := body()
	if err != nil {
		return 0, err
	}
	end := now()
	if window > 0 {
		end = quiesce(now, window, 30*time.Second)
	}
	return float64(max(end-c0, 1)) / float64(max(n, 1)), nil
}

// quiesce waits, up to limit, for a window in which the process used less
// than 5% of a core, and returns now() at the start of that window.
func quiesce(now func() int64, window, limit time.Duration) int64 {
	t0 := time.Now()
	quiet.chunks++
	for {
		c, cpu0 := now(), cpuNanos()
		time.Sleep(window)
		quiet.windows++
		if cpuNanos()-cpu0 < int64(window)/20 || time.Since(t0) >= limit {
			return c
		}
	}
}

// quietStats counts, for the row in progress, the chunks that waited for
// quiet and the windows they waited: the progress log reports the ratio.
type quietStats struct{ chunks, windows int }

var quiet quietStats

// forDuration returns a chunk body that calls op with consecutive
// positions from *pos on until the clock has advanced by d (at least one
// call), and advances *pos. With the CPU clock a chunk is an amount of
// work, not of waiting: a chunk during which the machine's other jobs held
// the cores still does d of work.
func forDuration(op func(i int) error, pos *int, d time.Duration) func() (int, error) {
	return func() (int, error) {
		c0, n, step := clock(), 0, 1
		for {
			for range step {
				if err := op(*pos); err != nil {
					return n, err
				}
				*pos++
				n++
			}
			if clock()-c0 >= int64(d) {
				return n, nil
			}
			step = min(2*step, 16) // slow operations check the clock after each call
		}
	}
}

// quartiles returns the first and third quartiles of xs.
func quartiles(xs []float64) (float64, float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return math.NaN(), math.NaN()
	}
	at := func(q float64) float64 {
		f := q * float64(len(s)-1)
		i := int(f)
		if i+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[i] + (f-float64(i))*(s[i+1]-s[i])
	}
	return at(0.25), at(0.75)
}

// median returns the median of xs (NaN for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
