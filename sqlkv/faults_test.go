package sqlkv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/sqlkv"
)

// setServer changes a server setting and waits until a new session sees
// it.
func setServer(t testing.TB, s *sqlkv.Store, name, value string) {
	t.Helper()
	ctx := context.Background()
	q := fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", name, value)
	if value == "" {
		q = "ALTER SYSTEM RESET " + name
	}
	_, err := s.Pool().Exec(ctx, q)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, "SELECT pg_reload_conf()")
	require.NoError(t, err)
	for {
		conn, err := pgx.Connect(ctx, dsn(t))
		require.NoError(t, err)
		var got string
		require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got))
		conn.Close(ctx)
		if got == value {
			return
		}
	}
}

// A commit whose outcome the client cannot know is ErrUnknownOutcome. The
// server waits for a synchronous standby that does not exist, so COMMIT
// hangs after the commit is written locally; the test terminates that
// backend. PostgreSQL then reports that the transaction "has already
// committed locally, but might not have been replicated": the batch did
// land, and reading back is the only way to know.
func TestUnknownOutcomeWhenCommitIsCut(t *testing.T) {
	ownServer(t)
	s := openStore(t, sqlkv.Config{})
	k := qkey("q", 1)
	setServer(t, s, "synchronous_standby_names", "ghost")
	t.Cleanup(func() { setServer(t, s, "synchronous_standby_names", "") })
	// A backend idle in the pool reads its next command before it reloads
	// the configuration: start from new ones.
	s.Pool().Reset()

	done := make(chan error, 1)
	go func() {
		done <- apply(s, func(b engine.Batch) {
			_ = b.Require(engine.Absent(k))
			_ = b.Set(k, []byte("maybe"))
		})
	}()
	waitFor(t, s, done, "SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
	_, err := s.Pool().Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
	require.NoError(t, err)
	err = <-done
	require.ErrorIs(t, err, engine.ErrUnknownOutcome)
	require.NotErrorIs(t, err, engine.ErrConditionFailed)

	setServer(t, s, "synchronous_standby_names", "")
	s.Pool().Reset()
	v, err := s.Get(k)
	require.NoError(t, err, "the commit had landed")
	require.Equal(t, "maybe", string(v))
}

// A backend terminated while its batch waits on a row lock, before
// COMMIT: the server reports the termination at that statement, so the
// batch is known not to have landed; it is neither an unknown outcome nor
// a failed condition, and nothing is written.
func TestTerminatedBeforeCommitIsNotApplied(t *testing.T) {
	ownServer(t)
	s := openStore(t, sqlkv.Config{})
	gate, k := qkey("gate", 1), qkey("q", 1)
	mustSet(t, s, gate, []byte("g"))
	ctx := context.Background()
	blocker, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer blocker.Rollback(ctx)
	_, err = blocker.Exec(ctx, fmt.Sprintf("SELECT 1 FROM %s WHERE k = $1 FOR UPDATE", pgx.Identifier{s.Name()}.Sanitize()), gate)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		done <- apply(s, func(b engine.Batch) {
			_ = b.Set(k, []byte("never"))
			_ = b.Require(engine.Equals(gate, []byte("g")))
		})
	}()
	waitFor(t, s, done, "SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
	_, err = s.Pool().Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
	require.NoError(t, err)
	err = <-done
	require.Error(t, err)
	require.NotErrorIs(t, err, engine.ErrUnknownOutcome)
	require.NotErrorIs(t, err, engine.ErrConditionFailed)
	require.NoError(t, blocker.Rollback(ctx))
	_, err = s.Get(k)
	require.ErrorIs(t, err, engine.ErrNotFound)
	// The pool replaced the connection: the store goes on.
	mustSet(t, s, k, []byte("later"))
}

// The server stops (immediate shutdown: a crash) under a store with open
// connections: the next batch fails, and never silently succeeds; if its
// outcome is not unknown, nothing was written. After a restart the store
// goes on with new connections.
func TestServerStopAndRestart(t *testing.T) {
	srv := ownServer(t)
	s := openStore(t, sqlkv.Config{})
	mustSet(t, s, qkey("q", 1), []byte("before"))
	require.NoError(t, srv.Crash())
	restarted := false
	defer func() {
		if !restarted {
			require.NoError(t, srv.Restart())
		}
	}()
	err := apply(s, func(b engine.Batch) { _ = b.Set(qkey("q", 2), []byte("during")) })
	require.Error(t, err, "a batch on a stopped server")
	unknown := errors.Is(err, engine.ErrUnknownOutcome)
	t.Logf("a batch on a stopped server: %v", err)
	require.NoError(t, srv.Restart())
	restarted = true
	for i := 0; ; i++ { // the pool drops its dead connections as it meets them
		if _, err = s.Get(qkey("q", 1)); err == nil {
			break
		}
		require.Less(t, i, 1000, "the store does not recover: %v", err)
	}
	_, err = s.Get(qkey("q", 2))
	if !unknown {
		require.ErrorIs(t, err, engine.ErrNotFound, "a batch that failed with a known outcome wrote nothing")
	}
	mustSet(t, s, qkey("q", 3), []byte("after"))
}
