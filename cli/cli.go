package cli

import (
	"context"
	"io"

	"github.com/tipkv/tipkv"
)

// Engine is a kind of store the command opens besides a Pebble directory:
// a shared engine, named on the command line by a form of its own (a
// PostgreSQL DSN, a list of etcd endpoints). The tipkv binary of module
// github.com/tipkv/tipkv/cmd/tipkv registers etcdkv's and sqlkv's; a
// program of yours may register others.
type Engine struct {
	// Name names the engine in messages: "postgres", "etcd".
	Name string

	// Match reports whether a STORE argument names a store of this
	// engine. The first engine that matches opens it; an argument no
	// engine matches is a Pebble directory.
	Match func(target string) bool

	// Open opens the store target names, with opts (ReadOnly set for
	// every command that only reads, Clock the command's clock). It must
	// not create a store that is not there: the command never does.
	Open func(ctx context.Context, target string, opts *tipkv.Options) (*tipkv.DB, error)
}

// Options configure Main. A nil *Options is valid: Pebble directories
// only.
type Options struct {
	// Engines are the shared engines the command reaches, besides Pebble.
	Engines []Engine
}

// Main runs the tipkv command line args (without the program name),
// writing to stdout and stderr, and returns the exit status: 0 done (for
// check: healthy), 1 failed (or check found problems), 2 bad usage or a
// store that could not be opened. The package doc describes the
// commands.
func Main(args []string, stdout, stderr io.Writer, opts *Options) int {
	var engines []Engine
	if opts != nil {
		engines = opts.Engines
	}
	return run(args, stdout, stderr, engines)
}

// engineFor returns the engine that opens target, nil for a Pebble
// directory.
func (c *ctx) engineFor(target string) *Engine {
	for i := range c.engines {
		if e := &c.engines[i]; e.Match != nil && e.Match(target) {
			return e
		}
	}
	return nil
}
