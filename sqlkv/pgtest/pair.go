package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pair is a primary and a synchronous streaming standby, as production
// runs PostgreSQL for failover: a commit returns once the standby has
// flushed its WAL (synchronous_commit on, the standby named in
// synchronous_standby_names), so a commit acknowledged before the primary
// dies is on the standby when it is promoted. Clients connect by a
// multi-host DSN that asks for a read-write session: the primary while it
// lives, the standby once promoted. Its methods are for one goroutine.
type Pair struct {
	primary, standby *process
}

// standbyName is the standby's application name, which the primary's
// synchronous_standby_names waits for.
const standbyName = "pgtest_standby"

// StartPair starts a primary, takes a base backup of it into a standby,
// starts the standby streaming from it, and makes the primary's commits
// wait for the standby. It returns ErrNotInstalled without PostgreSQL;
// SQLKV_DSN plays no part (a pair is always started here).
func StartPair() (_ *Pair, err error) {
	bin := findPostgres()
	if bin == "" {
		return nil, ErrNotInstalled
	}
	p := &Pair{}
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()
	if p.primary, err = startProcess(bin); err != nil {
		return nil, err
	}
	if p.standby, err = startStandby(p.primary, standbyName); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.primary.dsn())
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		"ALTER SYSTEM SET synchronous_standby_names = '" + standbyName + "'",
		"ALTER SYSTEM SET synchronous_commit = 'on'",
		"SELECT pg_reload_conf()",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("pgtest: %s: %w", q, err)
		}
	}
	// Until the standby streams as the synchronous one, commits would
	// not wait for it: wait for that, polling the primary's view.
	for {
		var state string
		err := conn.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1", standbyName).Scan(&state)
		if err == nil && state == "sync" {
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pgtest: the standby did not become synchronous (state %q, %v)", state, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DSN is the pair's connection string: both servers, primary first, with
// target_session_attrs=read-write, so that a client connects to whichever
// accepts writes.
func (p *Pair) DSN() string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     "127.0.0.1:" + strconv.Itoa(p.primary.port) + ",127.0.0.1:" + strconv.Itoa(p.standby.port),
		Path:     "/postgres",
		RawQuery: "sslmode=disable&target_session_attrs=read-write",
	}
	return u.String()
}

// StandbyDSN is the standby's own connection string.
func (p *Pair) StandbyDSN() string { return p.standby.dsn() }

// KillPrimary stops the primary at once, as a crash would (pg_ctl stop -m
// immediate); it is not started again.
func (p *Pair) KillPrimary() error {
	return p.primary.ctl("-m", "immediate", "-w", "stop")
}

// Promote makes the standby the primary and waits until it accepts
// writes (pg_ctl promote -w).
func (p *Pair) Promote() error {
	return p.standby.ctl("-w", "-t", "120", "promote")
}

// Close stops both servers and removes their data.
func (p *Pair) Close() error {
	var err error
	for _, s := range []*process{p.standby, p.primary} {
		if s == nil {
			continue
		}
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}
	return err
}
