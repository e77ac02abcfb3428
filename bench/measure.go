package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A table is one section's results: a row per operation, a column per
// system, tipkv first, and the ratio peer/tipkv beside each peer.
type table struct {
	title   string
	systems []string // systems[0] is tipkv
	rows    []row
	notes   []string
}

// A row is one operation measured in every system. Lower is better in
// every row.
type row struct {
	group  string // "hot", "uniform", ... ; "" when there is none
	op     string
	unit   string // "ns/op", "ns/item", "bytes"
	values map[string]float64
}

func (r row) label() string {
	if r.group == "" {
		return r.op
	}
	return r.op + ", " + r.group
}

func (t *table) add(group, op, unit string, values map[string]float64) {
	t.rows = append(t.rows, row{group: group, op: op, unit: unit, values: values})
}

func (t *table) write(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n", t.title)
	ratios := t.systems[0] == sysTipkv
	head := []string{"operation", t.systems[0]}
	for _, s := range t.systems[1:] {
		head = append(head, s)
		if ratios {
			head = append(head, s+" / tipkv")
		}
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "| :--- |%s\n", strings.Repeat(" ---: |", len(head)-1))
	for _, r := range t.rows {
		cells := []string{r.label(), format(r.values[t.systems[0]], r.unit)}
		base, okBase := r.values[t.systems[0]]
		for _, s := range t.systems[1:] {
			v, ok := r.values[s]
			cell, ratio := "-", "-"
			if ok {
				cell = format(v, r.unit)
			}
			if ok && okBase && base > 0 {
				ratio = fmt.Sprintf("%.2fx", v/base)
			}
			cells = append(cells, cell)
			if ratios {
				cells = append(cells, ratio)
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	for _, n := range t.notes {
		fmt.Fprintf(w, "%s\n", n)
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w)
	}
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

// A contender is one system's side of a read row: op(i) performs the i-th
// operation of the row's shared random sequence and checks its result.
type contender struct {
	system string
	op     func(i int) error
	pos    int // next index into the sequence
}

// timeOps runs op from index start on until d has passed, checking the
// clock every few operations, and returns the time per operation and how
// many ran.
func timeOps(op func(int) error, start int, d time.Duration) (float64, int, error) {
	t0, c0 := time.Now(), clock()
	n := 0
	for {
		for range 16 {
			if err := op(start + n); err != nil {
				return 0, n, err
			}
			n++
		}
		if time.Since(t0) >= d {
			return float64(clock()-c0) / float64(n), n, nil
		}
	}
}

// measure warms every contender up with warm operations, then runs rounds
// of cell-long runs, the systems in a rotating order, and returns each
// system's median time per operation across the rounds. Interleaving keeps
// a burst of load from the machine's other work from landing on one system
// only.
func measure(cs []*contender, warm, rounds int, cell time.Duration) (map[string]float64, error) {
	for _, c := range cs {
		for i := range warm {
			if err := c.op(i); err != nil {
				return nil, fmt.Errorf("%s: %w", c.system, err)
			}
		}
		c.pos = warm
	}
	samples := make(map[string][]float64)
	for r := range rounds {
		for k := range cs {
			c := cs[(k+r)%len(cs)]
			ns, n, err := timeOps(c.op, c.pos, cell)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.system, err)
			}
			c.pos += n
			samples[c.system] = append(samples[c.system], ns)
		}
	}
	out := make(map[string]float64)
	for s, xs := range samples {
		out[s] = median(xs)
	}
	return out, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
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
		return time.Now().UnixNano()
	}
	return cpuNanos()
}

// elapsed returns the clock's time since c0 per n, in nanoseconds.
func elapsed(c0 int64, n int) float64 {
	return float64(clock()-c0) / float64(max(n, 1))
}

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
