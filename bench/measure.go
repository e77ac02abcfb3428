package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A table is one section's results: a row per operation, a column per
// system, tipkv first, and the ratio tipkv/peer with its interval beside
// each peer.
type table struct {
	title   string
	systems []string // systems[0] is tipkv
	rows    []row
	notes   []string
}

// A row is one operation measured in every system. Lower is better in
// every row, ratios included.
type row struct {
	group  string // "hot", "uniform", ... ; "" when there is none
	op     string
	unit   string             // "ns/op", "ns/item", "bytes"
	values map[string]float64 // per system: the median (reads) or mean (writes) over the rounds, or the one measurement
	times  map[string][]float64
	ratios map[string]estimate // per peer: tipkv / peer
	rounds int                 // 0: one measurement per system, no rounds
	capped bool                // stopped at the cap before its intervals were narrow enough
	wall   bool                // measured in wall time, not CPU time
}

func (r row) label() string {
	l := r.op
	if r.group != "" {
		l += ", " + r.group
	}
	if r.wall && cpuClock {
		l += " (wall time)"
	}
	return l
}

// addPaired adds a row measured by runPaired. Systems of t that res did
// not measure get no cell.
func (t *table) addPaired(group, op, unit string, res *paired, wall bool) {
	r := row{group: group, op: op, unit: unit, values: map[string]float64{}, times: res.times,
		ratios: map[string]estimate{}, rounds: res.rounds, capped: res.capped, wall: wall}
	for i, s := range res.systems {
		r.values[s] = res.value(s)
		if i > 0 {
			r.ratios[s] = res.ratio(s)
		}
	}
	t.rows = append(t.rows, r)
	if verbose {
		for _, s := range res.systems {
			progress("    %s:%s", s, fmt.Sprintf(" %.0f", res.times[s]))
		}
	}
	progress("  %s: %d rounds in %s%s, %.1f quiet windows per chunk: %s", r.label(), res.rounds, res.wall.Round(time.Millisecond),
		map[bool]string{true: " (cap)"}[res.capped], res.windows, r.ratioSummary(t.systems))
}

// addSingle adds a row of one measurement per system.
func (t *table) addSingle(group, op, unit string, values map[string]float64) {
	r := row{group: group, op: op, unit: unit, values: values, ratios: map[string]estimate{}}
	base, ok := values[t.systems[0]]
	for _, s := range t.systems[1:] {
		if v, okv := values[s]; ok && okv && v > 0 {
			r.ratios[s] = plain(base / v)
		}
	}
	t.rows = append(t.rows, r)
}

func (r row) ratioSummary(systems []string) string {
	var parts []string
	for _, s := range systems[1:] {
		if e, ok := r.ratios[s]; ok {
			parts = append(parts, fmt.Sprintf("tipkv/%s %s", s, e))
		}
	}
	return strings.Join(parts, ", ")
}

func (t *table) write(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n", t.title)
	head := []string{"operation", t.systems[0]}
	for _, s := range t.systems[1:] {
		head = append(head, s, "tipkv / "+s)
	}
	head = append(head, "rounds")
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "| :--- |%s\n", strings.Repeat(" ---: |", len(head)-1))
	for _, r := range t.rows {
		cells := []string{r.label(), cell(r.values, t.systems[0], r.unit)}
		for _, s := range t.systems[1:] {
			ratio := "-"
			if e, ok := r.ratios[s]; ok {
				ratio = e.String()
			}
			cells = append(cells, cell(r.values, s, r.unit), ratio)
		}
		rounds := "1"
		if r.rounds > 0 {
			rounds = fmt.Sprint(r.rounds)
		}
		if r.capped {
			rounds += " (cap)"
		}
		cells = append(cells, rounds)
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	for _, n := range t.notes {
		fmt.Fprintf(w, "%s\n\n", n)
	}
}

func cell(values map[string]float64, system, unit string) string {
	v, ok := values[system]
	if !ok {
		return "-"
	}
	return format(v, unit)
}

// String prints the ratio and its 95% interval: "0.76 [0.72, 0.80]".
func (e estimate) String() string {
	if math.IsNaN(e.lo) {
		return fmtRatio(e.ratio)
	}
	return fmt.Sprintf("%s [%s, %s]", fmtRatio(e.ratio), fmtRatio(e.lo), fmtRatio(e.hi))
}

// fmtRatio prints a ratio with two decimals, or as 1/n below 0.1, where
// decimals would hide it: 1/6,700 rather than 0.00015.
func fmtRatio(r float64) string {
	switch {
	case math.IsNaN(r):
		return "-"
	case r >= 10:
		return fmt.Sprintf("%.1f", r)
	case r >= 0.0995:
		return fmt.Sprintf("%.2f", r)
	}
	inv := 1 / r
	if inv < 100 {
		return fmt.Sprintf("1/%.0f", inv)
	}
	p := math.Pow(10, math.Floor(math.Log10(inv))-1) // two significant digits
	return "1/" + thousands(int(math.Round(inv/p)*p))
}

// format prints a measurement in its unit, scaled for reading.
func format(v float64, unit string) string {
	switch unit {
	case "bytes":
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case "ns/op", "ns/item":
		suffix := strings.TrimPrefix(unit, "ns")
		switch {
		case v >= 1e6:
			return fmt.Sprintf("%.1f ms%s", v/1e6, suffix)
		case v >= 1e4:
			return fmt.Sprintf("%.1f µs%s", v/1e3, suffix)
		case v >= 1e3:
			return fmt.Sprintf("%.2f µs%s", v/1e3, suffix)
		default:
			return fmt.Sprintf("%.0f ns%s", v, suffix)
		}
	}
	return fmt.Sprintf("%.3g %s", v, unit)
}

// dirSize returns the space the files under dir take on disk (allocated
// blocks, as du counts them).
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed by a compaction while we walk
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// valueGen yields the pseudo-random, incompressible values every system
// gets, the same bytes in the same order for the same seed.
type valueGen struct {
	rng  *rand.ChaCha8
	size int
}

func newValueGen(seed uint64, size int) *valueGen {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return &valueGen{rng: rand.NewChaCha8(s), size: size}
}

// next returns n fresh values, in memory of their own (Badger keeps
// references to what it is given until the write is done).
func (g *valueGen) next(n int) [][]byte {
	buf := make([]byte, n*g.size)
	_, _ = g.rng.Read(buf)
	out := make([][]byte, n)
	for i := range out {
		out[i] = buf[i*g.size : (i+1)*g.size : (i+1)*g.size]
	}
	return out
}

// cpuClock selects what clock measures: the process's CPU time (user and
// system, every goroutine: the stores' own goroutines and the garbage
// collector included) when set, wall time otherwise. CPU time is the
// default because the machine these figures come from is shared: other
// processes stretch wall time, not the CPU time this one uses.
var cpuClock = true

// clock returns the current time of the selected clock, in nanoseconds.
func clock() int64 {
	if !cpuClock {
		return wallNanos()
	}
	return cpuNanos()
}

func wallNanos() int64 { return time.Now().UnixNano() }

// slug turns a system's name into a directory name.
func slug(name string) string { return strings.ReplaceAll(strings.ToLower(name), " ", "-") }

// settleDown waits, up to limit, until the process has used less than 5%
// of a core for 200ms: the flushes and compactions a setup step started in
// the background are done, so the CPU time of what is measured next is its
// own. It returns how long it waited.
func settleDown(limit time.Duration) time.Duration {
	t0 := time.Now()
	for time.Since(t0) < limit {
		c0 := cpuNanos()
		time.Sleep(200 * time.Millisecond)
		if cpuNanos()-c0 < int64(10*time.Millisecond) {
			break
		}
	}
	return time.Since(t0)
}

// cpuNanos returns the CPU time the process has used.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
