package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
)

func TestMainHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out := cliOK(t, args...)
		require.Contains(t, out, "Usage:")
		for _, c := range commands() {
			require.Contains(t, out, "  "+c.name+" ", "every command is listed")
		}
	}
	out, errOut, code := cli(t)
	require.Equal(t, exitUsage, code, "no command is bad usage")
	require.Empty(t, out)
	require.Contains(t, errOut, "Usage:")
}

// Every command has --help, -h and "tipkv help CMD": usage on stdout,
// exit 0, and the store is not needed.
func TestCommandHelp(t *testing.T) {
	for _, c := range commands() {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}, {c.name, "some-dir", "--help"}} {
			out := cliOK(t, args...)
			require.Contains(t, out, strings.TrimSpace("usage: tipkv "+c.name+" [flags] "+strings.Join(c.args, " ")), "%v", args)
			require.Contains(t, out, "--json")
			require.Contains(t, out, c.summary)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	dir := sample(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate", dir}, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"stats"}, "want 1 arguments (DIR), have 0"},
		{[]string{"stats", dir, "extra"}, "want 1 arguments (DIR), have 2"},
		{[]string{"history", dir, "users"}, "want 3 arguments (DIR COLLECTION ID), have 2"},
		{[]string{"feed", dir}, "want 2 arguments"},
		{[]string{"queue", dir}, "want 2 arguments"},
		{[]string{"dump", "--bogus", dir}, "flag provided but not defined: -bogus"},
		{[]string{"history", dir, "users", "alice", "-n", "many"}, `invalid value "many" for flag -n`},
		{[]string{"history", dir, "users", "alice", "-n", "-1"}, "-n must be >= 0"},
		{[]string{"history", dir, "users", "alice", "--as-of", "0"}, "--as-of must be >= 1"},
		{[]string{"feed", dir, "clicks", "--since", "yesterday"}, `"yesterday" is neither`},
		{[]string{"dump", dir, "--family", "nope"}, `unknown family "nope"`},
		{[]string{"check", dir, "--max", "-1"}, "--max must be >= 0"},
	}
	for _, c := range cases {
		out, errOut, code := cli(t, c.args...)
		require.Equal(t, exitUsage, code, "%v: %s", c.args, errOut)
		require.Empty(t, out, "%v", c.args)
		require.Contains(t, errOut, c.want, "%v", c.args)
		if !strings.Contains(c.want, "unknown command") {
			require.Contains(t, errOut, "usage: tipkv ", "%v", c.args)
		}
	}
}

// Flags may come before, between or after the arguments; "--" ends them.
func TestFlagsAnywhere(t *testing.T) {
	dir := sample(t)
	want := cliOK(t, "history", "-n", "1", dir, "users", "alice")
	require.Equal(t, want, cliOK(t, "history", dir, "users", "alice", "-n", "1"))
	require.Equal(t, want, cliOK(t, "history", dir, "-n=1", "users", "alice"))
	require.Equal(t, want, cliOK(t, "history", dir, "users", "--n", "1", "alice"))
	require.Equal(t, want, cliOK(t, "history", "-n", "1", "--", dir, "users", "alice"))

	// After "--", a document id may start with a dash.
	dir = writeStore(t, func(db *tipkv.DB) { set(t, db, vkey("c", "-x", 1), mp(t, "v")) })
	out := cliOK(t, "history", "--json", dir, "--", "c", "-x")
	require.Equal(t, "-x", jsonOf(t, out)["id"])
}

// A store that is missing, empty or not a tipkv store is refused with
// exit status 2 and a sentence, never a stack trace; nothing is created,
// by the commands that read and by those that write (compact, queue
// --requeue and --discard).
func TestOpenErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	empty := t.TempDir()
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644))
	var runs [][]string
	for _, c := range commands() {
		if len(c.args) == 0 || c.args[0] != "DIR" {
			continue // version
		}
		args := []string{c.name}
		for range c.args {
			args = append(args, "x")
		}
		runs = append(runs, args)
	}
	runs = append(runs, []string{"queue", "x", "jobs", "--requeue", "all"}, []string{"queue", "x", "jobs", "--discard", "1"})
	for _, args := range runs {
		for dir, want := range map[string]string{
			missing: "no tipkv store there",
			empty:   "no tipkv store there",
			foreign: "not a tipkv store",
		} {
			args[1] = dir
			out, errOut, code := cli(t, args...)
			require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
			require.Empty(t, out)
			require.Contains(t, errOut, "tipkv "+args[0]+": ")
			require.Contains(t, errOut, want, "%v", args)
			require.NotContains(t, errOut, "goroutine")

			_, err := os.Stat(missing)
			require.True(t, os.IsNotExist(err), "%v must not create the store", args)
			entries, err := os.ReadDir(empty)
			require.NoError(t, err)
			require.Empty(t, entries, "%v must not create the store", args)
		}
	}
}

// The store held by another tipkv.DB (here in this process, as Pebble's
// lock makes no difference) is refused with a clear message.
func TestStoreInUse(t *testing.T) {
	dir := sample(t)
	db, err := tipkv.Open(dir, nil)
	require.NoError(t, err)
	defer db.Close()
	for _, args := range [][]string{{"stats", dir}, {"dump", dir}, {"check", dir}, {"compact", dir}, {"history", dir, "users", "alice"}} {
		out, errOut, code := cli(t, args...)
		require.Equal(t, exitUsage, code)
		require.Empty(t, out)
		require.Contains(t, errOut, "the store is in use by another process")
	}
}

// Read commands change nothing in the store's directory.
func TestReadCommandsWriteNothing(t *testing.T) {
	dir := sample(t)
	before := dirState(t, dir)
	for _, args := range [][]string{
		{"stats", dir}, {"dump", dir}, {"check", dir}, {"history", dir, "users", "alice"},
		{"feed", dir, "clicks"}, {"stats", "--json", dir},
	} {
		cliOK(t, args...)
	}
	require.Equal(t, before, dirState(t, dir))
}

func TestVersion(t *testing.T) {
	out := cliOK(t, "version")
	require.Regexp(t, `(?m)^tipkv +\S+ +github.com/tipkv/tipkv$`, out)
	require.Regexp(t, `(?m)^format +`+strconv.Itoa(tipkv.FormatVersion)+` +store format it writes; it reads formats 1 to `+strconv.Itoa(tipkv.FormatVersion)+`$`, out)
	require.Regexp(t, `(?m)^go +go1\.`, out)

	m := jsonOf(t, cliOK(t, "version", "--json"))
	require.Equal(t, "github.com/tipkv/tipkv", m["module"])
	require.NotEmpty(t, m["version"])
	require.EqualValues(t, tipkv.FormatVersion, m["format"])
	require.EqualValues(t, 1, m["oldest_format"])

	_, errOut, code := cli(t, "version", "extra")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "want 0 arguments")
}

// With --json every error is one JSON object on one line of stderr, with
// the exit status it would have as text, and nothing on stdout.
func TestJSONErrors(t *testing.T) {
	dir := sample(t)
	missing := filepath.Join(t.TempDir(), "none")
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644))
	locked := sample(t)
	db, err := tipkv.Open(locked, nil)
	require.NoError(t, err)
	defer db.Close()

	cases := []struct {
		args    []string
		code    int
		kind    string
		command string
		want    string
	}{
		{[]string{"frobnicate", "--json"}, exitUsage, "usage", "", `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate", "--json"}, exitUsage, "usage", "", `unknown command "frobnicate"`},
		{[]string{"dump", "--json", "--bogus", dir}, exitUsage, "usage", "dump", "flag provided but not defined: -bogus"},
		{[]string{"stats", "--json"}, exitUsage, "usage", "stats", "want 1 arguments (DIR), have 0"},
		{[]string{"history", dir, "users", "alice", "-n", "-1", "--json"}, exitUsage, "usage", "history", "-n must be >= 0"},
		{[]string{"stats", "--json", missing}, exitUsage, "no_store", "stats", "no tipkv store there"},
		{[]string{"stats", "--json", foreign}, exitUsage, "not_a_store", "stats", "not a tipkv store"},
		{[]string{"check", "--json", locked}, exitUsage, "in_use", "check", "the store is in use by another process"},
		{[]string{"history", "--json", dir, "users", "carol"}, exitFail, "not_found", "history", `collection "users" has no document "carol"`},
		{[]string{"feed", "--json", dir, "nope"}, exitFail, "not_found", "feed", `stream "nope" has no events`},
		{[]string{"queue", "--json", dir, "nope"}, exitFail, "not_found", "queue", `the store has no queue "nope"`},
	}
	for _, c := range cases {
		out, errOut, code := cli(t, c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, errOut)
		require.Empty(t, out, "%v", c.args)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "%v: one line:\n%s", c.args, errOut)
		m := jsonOf(t, errOut)
		require.Contains(t, m["error"], c.want, "%v", c.args)
		require.Equal(t, c.kind, m["kind"], "%v", c.args)
		require.EqualValues(t, c.code, m["exit_status"], "%v", c.args)
		if c.command == "" {
			require.NotContains(t, m, "command")
		} else {
			require.Equal(t, c.command, m["command"], "%v", c.args)
		}

		// Without --json, the same failure is text with the same status.
		var text []string
		for _, a := range c.args {
			if a != "--json" {
				text = append(text, a)
			}
		}
		_, errOut, code = cli(t, text...)
		require.Equal(t, c.code, code, "%v", text)
		require.Contains(t, errOut, c.want)
		require.False(t, strings.HasPrefix(errOut, "{"), "%v: text", text)
	}
}

func TestWantsJSON(t *testing.T) {
	require.True(t, wantsJSON([]string{"stats", "dir", "--json"}))
	require.True(t, wantsJSON([]string{"stats", "-json=true", "dir"}))
	require.False(t, wantsJSON([]string{"stats", "dir"}))
	require.False(t, wantsJSON([]string{"history", "dir", "--", "c", "--json"}), "after --, an argument")
}
