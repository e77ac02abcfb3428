package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's command line session, run as written against the store
// examples/shop writes, prints what the README shows (times of day and
// runs of spaces aside: they depend on when it runs).
func TestREADMESession(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run ./examples/shop")
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	const first = "$ go run ./examples/shop shop\n"
	i := strings.Index(string(readme), first)
	require.NotEqual(t, -1, i, "the README has the session")
	session := string(readme[i:])
	session = session[:strings.Index(session, "\n```")]

	dir := filepath.Join(t.TempDir(), "shop")
	build := exec.Command("go", "run", "./examples/shop", dir)
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "wrote a shop store in "+dir+"\n", string(out))

	clock := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z`)
	normal := func(s string) string {
		s = clock.ReplaceAllString(s, "TIME")
		return regexp.MustCompile(` +`).ReplaceAllString(s, " ")
	}
	steps := strings.Split(session, "\n$ ")[1:]
	require.NotEmpty(t, steps)
	for _, step := range steps {
		line, want, _ := strings.Cut(step, "\n")
		args := strings.Fields(line)
		require.Equal(t, "tipkv", args[0], "every step after the first runs tipkv: %q", line)
		for j, a := range args {
			if a == "shop" {
				args[j] = dir
			}
		}
		got := cliOK(t, args[1:]...)
		require.Equal(t, normal(want+"\n"), normal(got), "$ %s", line)
	}
}
