package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit statuses.
const (
	exitOK    = 0 // done; for check: healthy
	exitFail  = 1 // the command failed, or check found problems
	exitUsage = 2 // bad usage, or the store could not be opened
)

// command is one subcommand: its synopsis and help, and setup, which
// registers its flags on fs and returns the function that runs it with the
// positional arguments (exactly len(args) of them).
type command struct {
	name    string
	args    []string // positional arguments, for the synopsis and the count
	summary string
	help    string
	setup   func(fs *flag.FlagSet) func(c *ctx, args []string) int
}

// ctx is what a running command writes to.
type ctx struct {
	cmd            *command
	stdout, stderr io.Writer
	json           bool
}

func commands() []*command {
	return []*command{
		statsCommand, dumpCommand, historyCommand, feedCommand,
		queueCommand, checkCommand, compactCommand,
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
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		mainUsage(stderr)
		return exitUsage
	}
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
			fmt.Fprintf(stderr, "tipkv: unknown command %q\n\n", args[1])
			mainUsage(stderr)
			return exitUsage
		}
		fs, _, _ := newFlagSet(cmd)
		commandHelp(stdout, cmd, fs)
		return exitOK
	}
	cmd := lookupCommand(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "tipkv: unknown command %q\n\n", args[0])
		mainUsage(stderr)
		return exitUsage
	}
	fs, jsonOut, runCmd := newFlagSet(cmd)
	pos, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		commandHelp(stdout, cmd, fs)
		return exitOK
	}
	if err == nil && len(pos) != len(cmd.args) {
		err = fmt.Errorf("want %d arguments (%s), have %d", len(cmd.args), strings.Join(cmd.args, " "), len(pos))
	}
	if err != nil {
		fmt.Fprintf(stderr, "tipkv %s: %v\n", cmd.name, err)
		fmt.Fprintf(stderr, "usage: %s\nRun 'tipkv %s --help' for more.\n", synopsis(cmd), cmd.name)
		return exitUsage
	}
	return runCmd(&ctx{cmd: cmd, stdout: stdout, stderr: stderr, json: *jsonOut}, pos)
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

func synopsis(cmd *command) string {
	return fmt.Sprintf("tipkv %s [flags] %s", cmd.name, strings.Join(cmd.args, " "))
}

func mainUsage(w io.Writer) {
	fmt.Fprint(w, `tipkv inspects and maintains a tipkv store.

Usage:
  tipkv COMMAND [flags] DIR [arguments]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Every command takes --help and --json; flags may follow the arguments.
Only compact and queue --requeue/--discard write; the rest open read-only.
Exit status: 0 ok, 1 failed or unhealthy (check), 2 bad usage or cannot open.
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

// failf reports a failure of the running command on stderr and returns
// code.
func (c *ctx) failf(code int, format string, args ...any) int {
	fmt.Fprintf(c.stderr, "tipkv %s: %s\n", c.cmd.name, fmt.Sprintf(format, args...))
	return code
}
