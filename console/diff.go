package console

import "strings"

// DiffLine is one line of a diff between two renderings: Op is " " for a
// line both have, "-" for a line of the older one only, "+" for a line of
// the newer one only.
type DiffLine struct {
	Op   string `json:"op"`
	Text string `json:"text"`
}

// maxDiffLines bounds the lines a diff compares on each side; past it the
// diff is the whole of a followed by the whole of b.
const maxDiffLines = 20000

// diffLines returns a shortest edit script from the lines of a to the
// lines of b (Myers' algorithm, O((N+M)D) time), as the lines of a unified
// diff without hunks: every line of both, in order.
func diffLines(a, b string) []DiffLine {
	x, y := splitLines(a), splitLines(b)
	// Lines both start and end with are kept out of the search.
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var out []DiffLine
	for _, l := range x[:pre] {
		out = append(out, DiffLine{" ", l})
	}
	out = append(out, myers(x[pre:len(x)-suf], y[pre:len(y)-suf])...)
	for _, l := range x[len(x)-suf:] {
		out = append(out, DiffLine{" ", l})
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// maxEdits bounds the lines a diff adds and removes; past it the diff is
// the whole of one side removed and the other added. Memory is
// O(maxEdits²) at most, time O((N+M) x maxEdits).
const maxEdits = 2000

// myers diffs x and y. Too large inputs give all of x removed and all of
// y added.
func myers(x, y []string) []DiffLine {
	n, m := len(x), len(y)
	if n+m == 0 {
		return nil
	}
	if n > maxDiffLines || m > maxDiffLines {
		return replaceAll(x, y)
	}
	dMax := min(n+m, maxEdits)
	off := dMax + 1
	v := make([]int, 2*dMax+3)
	// trace[d] is the frontier before round d, for k in [-d, d].
	var trace [][]int
	for d := 0; d <= dMax; d++ {
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
		for k := -d; k <= d; k += 2 {
			var i int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				i = v[off+k+1] // down: insert from y
			} else {
				i = v[off+k-1] + 1 // right: delete from x
			}
			j := i - k
			for i < n && j < m && x[i] == y[j] {
				i++
				j++
			}
			v[off+k] = i
			if i >= n && j >= m {
				return backtrack(trace, x, y, d)
			}
		}
	}
	return replaceAll(x, y)
}

// backtrack walks the saved frontiers from the end back to the start.
func backtrack(trace [][]int, x, y []string, dEnd int) []DiffLine {
	i, j := len(x), len(y)
	var rev []DiffLine
	for d := dEnd; d > 0; d-- {
		at := func(k int) int { return trace[d][k+d] }
		k := i - j
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		pi := at(pk)
		pj := pi - pk
		for i > pi && j > pj {
			i--
			j--
			rev = append(rev, DiffLine{" ", x[i]})
		}
		if i == pi {
			j--
			rev = append(rev, DiffLine{"+", y[j]})
		} else {
			i--
			rev = append(rev, DiffLine{"-", x[i]})
		}
	}
	for i > 0 && j > 0 {
		i--
		j--
		rev = append(rev, DiffLine{" ", x[i]})
	}
	out := make([]DiffLine, len(rev))
	for k, l := range rev {
		out[len(rev)-1-k] = l
	}
	return out
}

func replaceAll(x, y []string) []DiffLine {
	out := make([]DiffLine, 0, len(x)+len(y))
	for _, l := range x {
		out = append(out, DiffLine{"-", l})
	}
	for _, l := range y {
		out = append(out, DiffLine{"+", l})
	}
	return out
}
