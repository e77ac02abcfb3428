// Package pgtest gives tests a PostgreSQL server, as package etcdtest gives
// them an etcd cluster: a throwaway cluster that it makes in a temporary
// directory and starts on a free loopback port, or the server that
// SQLKV_DSN names. sqlkv's tests, and the tests of modules built on sqlkv,
// run on it:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		srv := pgtest.Default(t)
//		db, err := sqlkv.Open(ctx, sqlkv.Config{DSN: srv.DSN(), Table: srv.NewTable()}, nil)
//		...
//	}
//
// The environment decides which server:
//
//	SQLKV_DSN=...          use that server (a URL, postgres://..., or
//	                       key=value pairs: whatever pgx parses); tables
//	                       are made in it and left behind
//	SQLKV_ALLOW_SKIP=1     skip the tests that need a server, with a
//	                       message, where PostgreSQL is not installed
//
// Without either, the package starts a server of its own from the newest
// PostgreSQL under /usr/lib/postgresql/*/bin (or pg_ctl on PATH), as the
// postgres user when the tests run as root (the server refuses root), with
// fsync off; a machine without PostgreSQL fails the tests with a message
// that says to run sqlkv/install-postgres.sh.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The environment variables the package reads.
const (
	// DSNEnv names a server to use instead of starting one.
	DSNEnv = "SQLKV_DSN"
	// AllowSkipEnv, set to anything, makes Default skip the test (and Main
	// run nothing) where PostgreSQL is not installed, instead of failing.
	AllowSkipEnv = "SQLKV_ALLOW_SKIP"
)

// ErrNotInstalled is returned by Start when no DSN is given and PostgreSQL
// is not installed. Its message says how to install it.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL is not installed (no pg_ctl under /usr/lib/postgresql/*/bin or on PATH): run sqlkv/install-postgres.sh, or point " + DSNEnv + " at a server, or set " + AllowSkipEnv + "=1 to skip")

// ErrNotStarted is returned by the methods that stop and start a server
// when the package did not start it (it is the one SQLKV_DSN names).
var ErrNotStarted = errors.New("pgtest: the server was not started by pgtest (" + DSNEnv + " names it)")

// Server is a PostgreSQL server for tests: one that Start started, or the
// one SQLKV_DSN names. Its methods are safe for concurrent use.
type Server struct {
	dsn   string
	run   string       // names this process's tables apart from other runs'
	table atomic.Int64 // tables handed out

	proc *process // nil when DSNEnv names the server
}

// Start returns a server: the one DSNEnv names, checked with a
// connection, or a new one this package starts and Close stops. Without
// DSNEnv, and without PostgreSQL installed, it returns ErrNotInstalled.
func Start() (*Server, error) {
	s := &Server{run: strconv.FormatInt(time.Now().UnixNano()%1e9, 36)}
	if dsn := os.Getenv(DSNEnv); dsn != "" {
		s.dsn = dsn
		if err := s.ping(); err != nil {
			return nil, fmt.Errorf("pgtest: the server %s names: %w", DSNEnv, err)
		}
		return s, nil
	}
	bin := findPostgres()
	if bin == "" {
		return nil, ErrNotInstalled
	}
	var err error
	for range 3 { // a free port can be taken before the server binds it
		if s.proc, err = startProcess(bin); err == nil {
			s.dsn = s.proc.dsn()
			return s, nil
		}
	}
	return nil, err
}

// ping connects once, to tell a DSN that names no server from a test
// that fails.
func (s *Server) ping() error {
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// DSN is the server's connection string: DSNEnv's as given, or key=value
// a URL for the server Start started. Parse it (pgx.ParseConfig,
// pgxpool.ParseConfig, or PoolConfig) to change a setting; never append
// to it, as it may be a URL.
func (s *Server) DSN() string { return s.dsn }

// Env is the environment entry that gives a child process (a test binary
// run again) this server: its tests' Default then returns a Server on it.
func (s *Server) Env() string { return DSNEnv + "=" + s.dsn }

// PoolConfig parses the DSN into a pool configuration whose connections
// carry application_name app, so that a test can tell its backends in
// pg_stat_activity from everyone else's. The pool's size is pgxpool's
// default unless the DSN sets pool_max_conns.
func (s *Server) PoolConfig(app string) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(s.dsn)
	if err != nil {
		return nil, fmt.Errorf("pgtest: parse the DSN: %w", err)
	}
	if app != "" {
		pc.ConnConfig.RuntimeParams["application_name"] = app
	}
	return pc, nil
}

// NewTable returns a table name that no other call in this process, nor
// (very likely) any other test run on the same server, returns:
// kv_<run>_<n>. The table is not created.
func (s *Server) NewTable() string {
	return fmt.Sprintf("kv_%s_%d", s.run, s.table.Add(1))
}

// Started reports whether pgtest started the server, so that a test may
// stop, crash and restart it (Crash, Restart) and signal its backends'
// processes. It is false for the server DSNEnv names.
func (s *Server) Started() bool { return s.proc != nil }

// Crash stops the server at once, as a crash would (pg_ctl stop -m
// immediate): its sessions end without a word and it recovers from its
// WAL at the next start. It returns ErrNotStarted unless Started.
func (s *Server) Crash() error {
	if s.proc == nil {
		return ErrNotStarted
	}
	return s.proc.ctl("-m", "immediate", "-w", "stop")
}

// Restart starts the server again after Crash, on the same port and data,
// and waits until it accepts connections. It returns ErrNotStarted unless
// Started.
func (s *Server) Restart() error {
	if s.proc == nil {
		return ErrNotStarted
	}
	return s.proc.start()
}

// Close stops a server that Start started and removes its data; for the
// one DSNEnv names it does nothing (the tables made there stay).
func (s *Server) Close() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.close()
}

// The process's server, for Default and Main.
var (
	defaultMu  sync.Mutex
	defaultSrv *Server
	defaultErr error
)

// Default returns the test binary's server, starting it at the first call
// (Start); Main stops it when the tests end. When PostgreSQL is not
// installed it fails t, saying to run sqlkv/install-postgres.sh, or skips
// t when AllowSkipEnv is set; when the start fails otherwise, it fails t
// (and every later caller) with the start's error.
func Default(t testing.TB) *Server {
	t.Helper()
	defaultMu.Lock()
	if defaultSrv == nil && defaultErr == nil {
		defaultSrv, defaultErr = Start()
	}
	s, err := defaultSrv, defaultErr
	defaultMu.Unlock()
	switch {
	case errors.Is(err, ErrNotInstalled) && os.Getenv(AllowSkipEnv) != "":
		t.Skipf("PostgreSQL is not installed; skipped, as %s asks", AllowSkipEnv)
	case err != nil:
		t.Fatal(err)
	}
	return s
}

// Main runs the tests of m and then stops the server that Default
// started, if any: the TestMain of a package whose tests call Default,
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// It returns m.Run's exit code, or 1 when the server could not be stopped.
func Main(m *testing.M) int {
	code := m.Run()
	defaultMu.Lock()
	s := defaultSrv
	defaultSrv, defaultErr = nil, nil
	defaultMu.Unlock()
	if s != nil {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop PostgreSQL:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}
