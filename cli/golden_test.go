package cli

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt from what the commands print now")

// TestGolden runs the command lines of every testdata/*.txt file and
// compares what they print with what the file says they print: a failing
// step means the output changed. Check the diff; if the change is meant,
// rewrite the files and commit them with the change:
//
//	go test ./cli -run TestGolden -rewrite
//
// A file is a header of comment lines ("#"), then steps. A step is a
// command line, "$ tipkv ARGS", then what it printed: stdout as it is,
// then "--- stderr" and stderr when there is any, then "--- exit N" when
// the exit status is not 0; a blank line ends it. Comment lines just
// before a step describe it. ARGS are split on spaces; an argument with a
// space or a quote is Go-quoted ("a b").
//
// Each file runs against a store of its own, built by the function of the
// same name in goldenStores, at fixed times; the commands run with the
// clock at goldenNow (knobs.now). Steps run in order, and those that write
// (queue --requeue) change the store for the steps after them.
//
// In arguments, $STORE is the file's store, $MISSING a path where nothing
// is, $EMPTY an empty directory, $FOREIGN a directory that holds a file
// and no store, $DEST and $DEST2 paths where nothing is yet (for backup).
// In what is printed, those paths are written as these names again, and
// the figures that differ from run to run on the same store are masked as
// described in goldenMasks.
//
// What a step prints must not depend on how busy the machine is. The
// clock is fixed, and compact's "still compacting" line never comes
// (knobs.tickEvery). But Pebble flushes and compacts in the background of
// a command that opens the store for writing, racing the command's close:
// after compact or queue --requeue/--discard, a step may show what the
// store holds, not its LSM tree (stats' LSM and ENGINE sections), unless
// compact put every table in the bottom level.
func TestGolden(t *testing.T) {
	fixNow(t)
	defer func(d time.Duration) { knobs.tickEvery = d }(knobs.tickEvery)
	knobs.tickEvery = time.Duration(math.MaxInt64) // a slow step must not add a "still compacting" line

	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var names []string
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		names = append(names, name)
		t.Run(name, func(t *testing.T) { runGolden(t, path, name) })
	}
	for name := range goldenStores {
		require.Contains(t, names, name, "goldenStores has a store no file uses")
	}
}

// goldenStores builds the store of each golden file, testdata/NAME.txt,
// and returns its directory ("" for a file whose commands need none).
// Each is written at fixed times (writeStore), so that what the commands
// print is the same on every run.
var goldenStores = map[string]func(t *testing.T) string{
	"help":           func(*testing.T) string { return "" },
	"version":        func(*testing.T) string { return "" },
	"usage":          sample,
	"sample":         sample,
	"real":           realStore,
	"foreign":        foreignStore,
	"prefixes":       prefixStore,
	"problems":       problemStore,
	"pruned":         prunedStore,
	"no-format-key":  noFormatKeyStore,
	"corrupt-block":  func(t *testing.T) string { return corruptStore(t, 20<<10) },
	"delete-markers": deleteMarkerStore,
	"json-values":    jsonValueStore,
	"tombstones":     tombstoneStore,
	"broken-queue":   brokenQueueStore,
	"compact":        compactStore,
	"ttl":            ttlStore,
	"groups":         groupsStore,
}

// goldenMasks are the figures that differ between two runs against the
// same store, or between two machines: each is replaced by ~ in what the
// commands it names print (stdout and stderr), before it is compared.
// Nothing else is masked.
var goldenMasks = []struct {
	cmds []string // the commands whose output it applies to
	why  string
	re   *regexp.Regexp
	with string
}{
	{
		[]string{"stats"},
		"the store's size on disk is what its files take as du counts them, which depends on the file system (Pebble preallocates its log)",
		regexp.MustCompile(`(?m)^(disk|WAL on disk)( +)\d+(\.\d)? [KMGT]?i?B`), "$1$2~",
	},
	{
		[]string{"stats"},
		"--json: the same sizes on disk; how long the store has been open, and the compaction and stall time of this open",
		regexp.MustCompile(`"(disk_usage|wal_physical_size|uptime_seconds|compaction_seconds|write_stall_seconds)": [\d.e+-]+`), `"$1": "~"`,
	},
	{
		[]string{"compact"},
		"how long it took and the sizes on disk before and after",
		regexp.MustCompile(`(?m)^compacted (\S+) in \S+: \S+ \S+ -> \S+ \S+ on disk`), "compacted $1 in ~: ~ -> ~ on disk",
	},
	{
		[]string{"compact"},
		"its first progress line's size on disk",
		regexp.MustCompile(`(?m)^(compacting \S+: )\S+ \S+( on disk)$`), "$1~$2",
	},
	{
		[]string{"compact"},
		"each step's estimated size (its width sets the spaces before it) and time",
		regexp.MustCompile(`(?m)^(  \d+/\d+ \S+) +(\d+(\.\d)? [KMGT]?i?B +)?done in \S+$`), "$1 ~ done in ~",
	},
	{
		[]string{"compact"},
		"--json: the sizes on disk, how long each step and the whole took",
		regexp.MustCompile(`"(disk_before|disk_after|seconds)": [\d.e+-]+`), `"$1": "~"`,
	},
	{
		[]string{"version"},
		"the module's version, which is the build's (its width sets the spaces after it)",
		regexp.MustCompile(`(?m)^tipkv +\S+ +(\S+/\S+)$`), "tipkv ~ $1",
	},
	{
		[]string{"version"},
		"the spaces the version's width sets in the format line",
		regexp.MustCompile(`(?m)^format +(\d+) +`), "format $1 ",
	},
	{
		[]string{"version"},
		"the Go version and platform of the test binary",
		regexp.MustCompile(`(?m)^go +\S+ +\S+$`), "go ~ ~",
	},
	{
		[]string{"version"},
		"--json: the same",
		regexp.MustCompile(`"(version|go|platform)": "[^"]*"`), `"$1": "~"`,
	},
	{
		[]string{"backup"},
		"the copy's size, which depends on the file system, and its file count, on whether tables could be hard-linked",
		regexp.MustCompile(`(?m)^(files|size)( +)\S+( \S+)?`), "$1$2~",
	},
	{
		[]string{"backup"},
		"--json: the same",
		regexp.MustCompile(`(?m)^  "(files|bytes)": \d+`), `  "$1": "~"`,
	},
}

// goldenStep is one command line of a golden file, and what it printed.
type goldenStep struct {
	comment []string // the comment lines before it
	args    []string
	want    string // what the file says it prints
}

func runGolden(t *testing.T, path, name string) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	header, steps := parseGolden(t, string(data))
	require.NotEmpty(t, steps, "%s has no steps", path)

	build, ok := goldenStores[name]
	require.True(t, ok, "no store %q in goldenStores for %s", name, path)
	places := goldenPlaces(t, build(t))

	var out strings.Builder
	out.WriteString(header)
	for _, st := range steps {
		for _, c := range st.comment {
			out.WriteString(c + "\n")
		}
		args := make([]string, len(st.args))
		for i, a := range st.args {
			args[i] = places.Replace(a)
		}
		stdout, stderr, code := cli(t, args...)
		got := renderGolden(t, places, st.args, stdout, stderr, code)
		fmt.Fprintf(&out, "%s\n%s\n", goldenCommandLine(st.args), got)
		if !*rewrite && got != st.want {
			t.Errorf("%s: the output of\n\t%s\nchanged:\n%s", path, goldenCommandLine(st.args), diffLines(st.want, got))
		}
	}
	if *rewrite {
		require.NoError(t, os.WriteFile(path, []byte(out.String()), 0o644))
		return
	}
	// Every step printed what the file says; the file must also be in the
	// form -rewrite writes, so that a rewrite changes only what changed.
	if !t.Failed() && out.String() != string(data) {
		t.Errorf("%s is not in the form -rewrite writes (a step's blank line, a comment's place, the command line's quoting):\n%s",
			path, diffLines(string(data), out.String()))
	}
}

// parseGolden splits a golden file into its header and its steps.
func parseGolden(t *testing.T, text string) (header string, steps []goldenStep) {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], "$ ") {
		i++
	}
	head, comment := stepComment(lines[:i])
	header = strings.Join(head, "")
	for i < len(lines) {
		line := strings.TrimSuffix(lines[i], "\n")
		rest, ok := strings.CutPrefix(line+" ", "$ tipkv ")
		require.True(t, ok, "step %q does not run tipkv", line)
		st := goldenStep{comment: comment, args: splitGoldenArgs(t, rest)}
		i++
		start := i
		for i < len(lines) && !strings.HasPrefix(lines[i], "$ ") {
			i++
		}
		var block []string
		block, comment = stepComment(lines[start:i])
		want := strings.TrimSuffix(strings.Join(block, ""), "\n") // the blank line that ends a step
		if want != "" && !strings.HasSuffix(want, "\n") {
			want += "\n"
		}
		st.want = want
		steps = append(steps, st)
	}
	return header, steps
}

// stepComment splits off the comment lines at the end of lines that come
// after a blank line: they describe the step that follows.
func stepComment(lines []string) (rest, comment []string) {
	j := len(lines)
	for j > 0 && strings.HasPrefix(lines[j-1], "#") {
		j--
	}
	if j == len(lines) || j == 0 || lines[j-1] != "\n" {
		return lines, nil
	}
	for _, c := range lines[j:] {
		comment = append(comment, strings.TrimSuffix(c, "\n"))
	}
	return lines[:j], comment
}

// renderGolden writes what the command line args printed as a golden
// file holds it: the paths as their placeholders, the masks of its
// command applied.
func renderGolden(t *testing.T, places *strings.Replacer, args []string, stdout, stderr string, code int) string {
	t.Helper()
	var b strings.Builder
	for _, part := range []struct{ name, text string }{{"", stdout}, {"--- stderr\n", stderr}} {
		if part.text == "" {
			continue
		}
		require.True(t, strings.HasSuffix(part.text, "\n"), "output ends with a newline:\n%s", part.text)
		text := unplace(places, part.text)
		for _, m := range goldenMasks {
			if len(args) > 0 && slices.Contains(m.cmds, args[0]) {
				text = m.re.ReplaceAllString(text, m.with)
			}
		}
		for _, line := range strings.Split(text, "\n") {
			require.False(t, strings.HasPrefix(line, "$ "), "an output line starts with $, as a step does: %q", line)
		}
		b.WriteString(part.name + text)
	}
	if code != exitOK {
		fmt.Fprintf(&b, "--- exit %d\n", code)
	}
	return b.String()
}

// goldenPlaces makes the paths the placeholders of a golden file stand
// for, and returns a Replacer from placeholder to path.
func goldenPlaces(t *testing.T, store string) *strings.Replacer {
	tmp := t.TempDir()
	foreign := filepath.Join(tmp, "foreign")
	require.NoError(t, os.Mkdir(foreign, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644))
	empty := filepath.Join(tmp, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	if store == "" {
		store = filepath.Join(tmp, "no-store-for-this-file")
	}
	return strings.NewReplacer( // $DEST2 before $DEST, which begins it
		"$STORE", store, "$MISSING", filepath.Join(tmp, "missing"), "$EMPTY", empty,
		"$FOREIGN", foreign, "$DEST2", filepath.Join(tmp, "dest2"), "$DEST", filepath.Join(tmp, "dest"),
	)
}

// unplace writes the paths of places as their placeholders again, the
// longest path first, so that a path inside another is not cut.
func unplace(places *strings.Replacer, s string) string {
	var pairs [][2]string
	for _, name := range []string{"$STORE", "$MISSING", "$EMPTY", "$FOREIGN", "$DEST", "$DEST2"} {
		pairs = append(pairs, [2]string{places.Replace(name), name})
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
	for _, p := range pairs {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}

// splitGoldenArgs splits a step's arguments on spaces; a Go-quoted
// argument may hold spaces.
func splitGoldenArgs(t *testing.T, s string) []string {
	var args []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			require.NoError(t, err, "argument %s", s)
			a, err := strconv.Unquote(q)
			require.NoError(t, err)
			args = append(args, a)
			s = s[len(q):]
			continue
		}
		a, rest, _ := strings.Cut(s, " ")
		args = append(args, a)
		s = rest
	}
	return args
}

// goldenCommandLine writes args as a step's command line.
func goldenCommandLine(args []string) string {
	out := []string{"$ tipkv"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \"\\\t\n") {
			a = strconv.Quote(a)
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}

// diffLines shows where want and got differ, line by line: the lines
// from the first difference to the last, "-" for want's, "+" for got's,
// between two lines of context.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	we, ge := len(w), len(g) // the common suffix starts at w[we] and g[ge]
	for we > i && ge > i && w[we-1] == g[ge-1] {
		we--
		ge--
	}
	var b bytes.Buffer
	for j := max(i-2, 0); j < i; j++ {
		fmt.Fprintf(&b, "  %s\n", w[j])
	}
	for j := i; j < we; j++ {
		fmt.Fprintf(&b, "- %s\n", w[j])
	}
	for j := i; j < ge; j++ {
		fmt.Fprintf(&b, "+ %s\n", g[j])
	}
	for j := we; j < min(we+2, len(w)); j++ {
		fmt.Fprintf(&b, "  %s\n", w[j])
	}
	return b.String()
}
