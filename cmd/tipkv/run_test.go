package main

import (
	"os"
	"path/filepath"
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
			require.Contains(t, out, "usage: tipkv "+c.name+" [flags] "+strings.Join(c.args, " "), "%v", args)
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
// exit status 2 and a sentence, never a stack trace; nothing is created.
func TestOpenErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	empty := t.TempDir()
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644))
	for _, c := range commands() {
		args := []string{c.name}
		for range c.args {
			args = append(args, "x")
		}
		for dir, want := range map[string]string{
			missing: "no tipkv store there",
			empty:   "no tipkv store there",
			foreign: "is not a tipkv store",
		} {
			if c.name == "compact" && dir != foreign {
				continue // compact opens for writing: tested below
			}
			args[1] = dir
			out, errOut, code := cli(t, args...)
			require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
			require.Empty(t, out)
			require.Contains(t, errOut, "tipkv "+c.name+": ")
			require.Contains(t, errOut, want, "%v", args)
			require.NotContains(t, errOut, "goroutine")
		}
	}
	_, err := os.Stat(missing)
	require.True(t, os.IsNotExist(err), "a read command must not create the store")
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries, "a read command must not create the store")
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
