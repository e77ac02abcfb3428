package console

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A diff keeps every line of both sides in order, and is minimal on
// small cases.
func TestDiffLines(t *testing.T) {
	require.Equal(t, []DiffLine{{" ", "{"}, {"-", `  "a": 1`}, {"+", `  "a": 2`}, {" ", "}"}},
		diffLines("{\n  \"a\": 1\n}", "{\n  \"a\": 2\n}"))
	require.Empty(t, diffLines("", ""))
	require.Equal(t, []DiffLine{{"+", "x"}}, diffLines("", "x"))
	require.Equal(t, []DiffLine{{"-", "x"}}, diffLines("x", ""))
	require.Equal(t, []DiffLine{{"-", "a"}, {" ", "b"}, {" ", "c"}, {"+", "d"}}, diffLines("a\nb\nc", "b\nc\nd"))
}

// On random inputs the diff rebuilds both sides, and its changes are
// never more than replacing one side by the other.
func TestDiffLinesRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	gen := func() []string {
		n := r.IntN(30)
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('a' + r.IntN(5)))
		}
		return out
	}
	for range 2000 {
		a, b := gen(), gen()
		d := diffLines(strings.Join(a, "\n"), strings.Join(b, "\n"))
		var ra, rb []string
		changes := 0
		for _, l := range d {
			if l.Op != "+" {
				ra = append(ra, l.Text)
			}
			if l.Op != "-" {
				rb = append(rb, l.Text)
			}
			if l.Op != " " {
				changes++
			}
		}
		require.Equal(t, len(a), len(ra))
		require.Equal(t, len(b), len(rb))
		for i := range a {
			require.Equal(t, a[i], ra[i])
		}
		for i := range b {
			require.Equal(t, b[i], rb[i])
		}
		require.LessOrEqual(t, changes, len(a)+len(b))
	}
}

// Past maxEdits the diff is the whole of one side against the other, in
// bounded time and memory.
func TestDiffLinesLarge(t *testing.T) {
	var a, b strings.Builder
	for i := range 5000 {
		a.WriteString("a" + string(rune('0'+i%10)) + "\n")
		b.WriteString("b" + string(rune('0'+i%10)) + "\n")
	}
	d := diffLines(a.String(), b.String())
	require.Len(t, d, 10000)
	require.Equal(t, "-", d[0].Op)
	require.Equal(t, "+", d[9999].Op)
}
