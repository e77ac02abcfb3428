package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tipkv/tipkv"
)

// Exit statuses.
const (
	exitOK    = 0 // done; for check: healthy
	exitFail  = 1 // the command failed, or check found problems
	exitUsage = 2 // bad usage, or the store could not be opened
)

// command is one subcommand: its synopsis and help, and setup, which
// registers its flags on fs and returns the function that runs it with the
// positional arguments (len(args) of them, or fewer when the last are
// optional).
type command struct {
	name string
	// args are the positional arguments, for the synopsis and the count;
	// the last may be optional, spelled in brackets ("[STREAM]").
	args    []string
	summary string
	help    string
	setup   func(fs *flag.FlagSet) func(c *ctx, args []string) int
}

// ctx is what a running command writes to.
type ctx struct {
	cmd            *command
	stdout, stderr io.Writer
	json           bool
	engines        []Engine // besides Pebble (Options.Engines)
}

func commands() []*command {
	return []*command{
		statsCommand, dumpCommand, historyCommand, feedCommand, groupsCommand, tailCommand,
		queueCommand, checkCommand, compactCommand, backupCommand, webCommand, versionCommand,
	}
}

func lookupCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run runs the tipkv command line args (without the program name) and
// returns the exit status (see Main).
func run(args []string, stdout, stderr io.Writer, engines []Engine) int {
	if len(args) == 0 {
		mainUsage(stderr)
		return exitUsage
	}
	// Errors found before the flags are parsed honour --json too.
	early := &ctx{stdout: stdout, stderr: stderr, json: wantsJSON(args), engines: engines}
	switch args[0] {
	case "-h", "-help", "--help":
		mainUsage(stdout)
		return exitOK
	case "help":
		if len(args) == 1 {
			mainUsage(stdout)
			return exitOK
		}
		cmd := lookupCommand(args[1])
		if cmd == nil {
			return early.unknownCommand(args[1])
		}
		fs, _, _ := newFlagSet(cmd)
		commandHelp(stdout, cmd, fs)
		return exitOK
	}
	cmd := lookupCommand(args[0])
	if cmd == nil {
		return early.unknownCommand(args[0])
	}
	early.cmd = cmd
	fs, jsonOut, runCmd := newFlagSet(cmd)
	pos, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		commandHelp(stdout, cmd, fs)
		return exitOK
	}
	if need := requiredArgs(cmd); err == nil && (len(pos) < need || len(pos) > len(cmd.args)) {
		want := fmt.Sprint(need)
		if need < len(cmd.args) {
			want = fmt.Sprintf("%d to %d", need, len(cmd.args))
		}
		err = fmt.Errorf("want %s arguments (%s), have %d", want, strings.Join(cmd.args, " "), len(pos))
	}
	if err != nil {
		return early.usagef("%v", err)
	}
	return runCmd(&ctx{cmd: cmd, stdout: stdout, stderr: stderr, json: *jsonOut, engines: engines}, pos)
}

// wantsJSON reports whether args ask for --json, before "--".
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-json", "--json", "-json=true", "--json=true", "-json=1", "--json=1":
			return true
		}
	}
	return false
}

func newFlagSet(cmd *command) (*flag.FlagSet, *bool, func(*ctx, []string) int) {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	jsonOut := fs.Bool("json", false, "write JSON for scripts instead of tables")
	return fs, jsonOut, cmd.setup(fs)
}

// parseInterspersed parses the flags in args wherever they are, so that
// "tipkv history DIR users alice -n 5" works as the synopsis shows. Every
// argument after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return pos, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// requiredArgs returns how many of cmd's positional arguments are
// required: those before the first in brackets.
func requiredArgs(cmd *command) int {
	for i, a := range cmd.args {
		if strings.HasPrefix(a, "[") {
			return i
		}
	}
	return len(cmd.args)
}

func synopsis(cmd *command) string {
	return strings.TrimSpace(fmt.Sprintf("tipkv %s [flags] %s", cmd.name, strings.Join(cmd.args, " ")))
}

func mainUsage(w io.Writer) {
	fmt.Fprint(w, `tipkv inspects and maintains a tipkv store.

Usage:
  tipkv COMMAND [flags] DIR [arguments]
  tipkv version [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Every command takes --help and --json; flags may follow the arguments.
Only compact and queue --requeue/--discard write; the rest open read-only
(backup writes DEST only).
No command creates a store: a missing or empty DIR is refused.
Exit status: 0 ok, 1 failed or unhealthy (check), 2 bad usage or cannot open.
With --json an error is one JSON object on a line of stderr:
  {"error": "...", "kind": "in_use", "command": "stats", "exit_status": 2}
Run 'tipkv COMMAND --help' for a command's flags.
`)
}

func commandHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\n%s\n\nFlags:\n", synopsis(cmd), cmd.summary, strings.TrimSpace(cmd.help))
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if len(f.Name) == 1 {
			left = "-" + f.Name
		}
		if name != "" {
			left += " " + name
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  %-18s %s\n", left, usage)
	})
}

// Error kinds, the "kind" of a JSON error object.
const (
	kindUsage    = "usage"       // bad usage (exit status 2)
	kindInUse    = "in_use"      // the store is open in another process (2)
	kindNoStore  = "no_store"    // no store at the path: missing or empty (2)
	kindFormat   = "not_a_store" // not a tipkv store, or a newer format (2)
	kindCorrupt  = "corrupt"     // stored data does not read or decode (2 at open, else 1)
	kindOpen     = "open"        // the store did not open for another reason (2)
	kindNotFound = "not_found"   // no such document, stream or queue (1)
	kindFailed   = "failed"      // the command failed (1)
)

// fail reports that the running command failed, and returns code. As
// text: "tipkv CMD: message" on stderr. With --json: one JSON object on a
// line of stderr,
//
//	{"error":"message","kind":"failed","command":"CMD","exit_status":1}
//
// where kind is one of the kind constants.
func (c *ctx) fail(code int, kind, msg string) int {
	name := ""
	if c.cmd != nil {
		name = c.cmd.name
	}
	if c.json {
		obj := object{{"error", msg}, {"kind", kind}}
		if name != "" {
			obj = append(obj, field{"command", name})
		}
		b, err := marshal(append(obj, field{"exit_status", code}))
		if err != nil { // cannot happen: every field is a string or an int
			b = []byte(fmt.Sprintf(`{"error":%q}`, msg))
		}
		fmt.Fprintf(c.stderr, "%s\n", b)
		return code
	}
	prefix := "tipkv"
	if name != "" {
		prefix += " " + name
	}
	fmt.Fprintf(c.stderr, "%s: %s\n", prefix, msg)
	return code
}

// failf reports a failure of the running command and returns code. Its
// kind is "corrupt" when an error among args matches tipkv.ErrCorrupt,
// else "failed".
func (c *ctx) failf(code int, format string, args ...any) int {
	kind := kindFailed
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, tipkv.ErrCorrupt) {
			kind = kindCorrupt
		}
	}
	return c.fail(code, kind, fmt.Sprintf(format, args...))
}

// notFoundf reports that what the command was asked about does not exist,
// with exit status 1.
func (c *ctx) notFoundf(format string, args ...any) int {
	return c.fail(exitFail, kindNotFound, fmt.Sprintf(format, args...))
}

// usagef reports bad usage of the running command and returns exitUsage.
// As text the command's synopsis follows.
func (c *ctx) usagef(format string, args ...any) int {
	c.fail(exitUsage, kindUsage, fmt.Sprintf(format, args...))
	if !c.json {
		fmt.Fprintf(c.stderr, "usage: %s\nRun 'tipkv %s --help' for more.\n", synopsis(c.cmd), c.cmd.name)
	}
	return exitUsage
}

// unknownCommand reports a command name tipkv does not have.
func (c *ctx) unknownCommand(name string) int {
	c.fail(exitUsage, kindUsage, fmt.Sprintf("unknown command %q", name))
	if !c.json {
		fmt.Fprintln(c.stderr)
		mainUsage(c.stderr)
	}
	return exitUsage
}
