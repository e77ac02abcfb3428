package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tipkv/tipkv/console"
)

var webCommand = &command{
	name:    "web",
	args:    []string{"STORE"},
	summary: "serve the web console of a store until interrupted",
	help: `
Serves package console's web console of STORE over HTTP: an overview with
charts, collections and document histories with diffs, feeds with their
consumer groups and a live tail, queues with their messages and dead
letters. It prints the URL and serves until interrupted (Ctrl-C, SIGTERM).

It binds to the loopback address unless --addr says otherwise: anyone who
reaches the port reads the store, and with --actions requeues and discards
its dead letters. The console authenticates no one; to show it to others,
mount package console in a service behind its own authentication.

The store is opened read-only, unless --actions, which opens it for
writing and lets the console's Requeue and Discard buttons act (each
action is logged on stderr). A Pebble directory is locked while it is
served, so this is for a stopped service's store or a checkpoint of it;
a running service mounts the console itself. The stores of shared engines
(PostgreSQL, etcd) are served while their services run.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		addr := fs.String("addr", "127.0.0.1:0", "`host:port` to listen on (port 0: any free port)")
		actions := fs.Bool("actions", false, "open the store for writing and let the console requeue and discard dead letters")
		return func(c *ctx, args []string) int { return web(c, args[0], *addr, *actions) }
	},
}

func web(c *ctx, target, addr string, actions bool) int {
	s, code := c.openStore(target, actions)
	if s == nil {
		return code
	}
	defer s.close()
	logger := slog.New(slog.NewTextHandler(c.stderr, nil))
	opts := &console.Options{Logger: logger}
	if actions {
		opts.Authorize = func(*http.Request, console.Action) error { return nil }
	}
	con, err := console.New(s.db, opts)
	if err != nil {
		return c.failed(err)
	}
	defer con.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return c.usagef("listen on %s: %v", addr, err)
	}
	url := "http://" + ln.Addr().String() + "/"
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{Handler: con, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	mode := "read-only"
	if actions {
		mode = "actions on"
	}
	if c.json {
		if err := writeJSON(c.stdout, object{{"url", url}, {"store", s.dir}, {"actions", actions}}); err != nil {
			cancel()
		}
	} else {
		fmt.Fprintf(c.stdout, "serving %s (%s) at %s\n", s.dir, mode, url)
	}
	if knobs.webServing != nil {
		knobs.webServing(url, cancel)
	}
	select {
	case err = <-served:
	case <-ctx.Done():
		// Server-sent event streams end when the console closes; give
		// the rest a moment to finish.
		_ = con.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(sctx)
		scancel()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return c.failf(exitFail, "serve: %v", err)
	}
	return exitOK
}
