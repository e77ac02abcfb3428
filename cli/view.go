package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/tipkv/tipkv"
)

// A view is what a command fetched from a store, ready to show: a table
// for people, or one JSON document for scripts (--json). A command first
// fetches its view from an open store (fetchStats, fetchQueue, ...),
// then shows it; fetching writes nothing to the output, so that anything
// else that shows a store (a web console) can fetch the same views.
type view interface {
	// table writes the view as tables for people.
	table(w io.Writer) error
	// json returns the view as one JSON document: an object, whose
	// fields keep their order.
	json() object
}

// show writes v as the command's output, JSON with --json, and returns
// the exit status: exitOK, or exitFail when writing failed.
func (c *ctx) show(v view) int {
	var err error
	if c.json {
		err = writeJSON(c.stdout, v.json())
	} else {
		err = v.table(c.stdout)
	}
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	return exitOK
}

// notFoundError says that what a command was asked about is not in the
// store: a document, a stream, a queue.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func notFoundf(format string, args ...any) error {
	return &notFoundError{fmt.Sprintf(format, args...)}
}

// failed reports err, a fetch's failure, and returns the exit status:
// what the command was asked about is not there (not_found, 1), the
// arguments are invalid for the store (tipkv.ErrInvalid: usage, 2), or
// the command failed (corrupt or failed, 1).
func (c *ctx) failed(err error) int {
	var nf *notFoundError
	switch {
	case errors.As(err, &nf):
		return c.notFoundf("%s", nf.msg)
	case errors.Is(err, tipkv.ErrInvalid):
		return c.usagef("%v", err)
	}
	return c.failf(exitFail, "%v", err)
}
