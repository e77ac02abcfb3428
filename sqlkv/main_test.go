package sqlkv_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/sqlkv/pgtest"
)

// The tests run on pgtest's server: one that the first test starts in a
// temporary directory and TestMain stops at the end, or the server
// SQLKV_DSN names (see package pgtest for SQLKV_DSN and SQLKV_ALLOW_SKIP).
// Without either, a machine without PostgreSQL fails the tests: run
// sqlkv/install-postgres.sh.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// server returns the tests' server.
func server(t testing.TB) *pgtest.Server {
	t.Helper()
	return pgtest.Default(t)
}

// dsn is the tests' server's connection string (a URL or key=value pairs:
// parse it, never append to it).
func dsn(t testing.TB) string {
	t.Helper()
	return server(t).DSN()
}

// newTable returns a table name no other test uses.
func newTable(t testing.TB) string {
	t.Helper()
	return server(t).NewTable()
}

// poolConfig parses the server's DSN into a pool configuration whose
// connections carry application_name app, so that a test can tell its own
// backends in pg_stat_activity from everyone else's.
func poolConfig(t testing.TB, app string) *pgxpool.Config {
	t.Helper()
	pc, err := server(t).PoolConfig(app)
	require.NoError(t, err)
	return pc
}

// openStore opens a store on a new table with cfg, closed at the end of
// the test.
func openStore(t testing.TB, cfg sqlkv.Config) *sqlkv.Store {
	t.Helper()
	if cfg.DSN == "" && cfg.Pool == nil {
		cfg.DSN = dsn(t)
	}
	if cfg.Table == "" {
		cfg.Table = newTable(t)
	}
	s, err := sqlkv.NewStore(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// second opens another store (another pool: as another process would) on
// s's table.
func second(t testing.TB, s engine.Store) *sqlkv.Store {
	t.Helper()
	cfg := s.(*sqlkv.Store).Config()
	cfg.Pool, cfg.DSN = nil, dsn(t)
	return openStore(t, cfg)
}

// ownServer skips a test that stops, restarts or reconfigures the server,
// or signals its processes, when the tests did not start it.
func ownServer(t testing.TB) *pgtest.Server {
	t.Helper()
	srv := server(t)
	if !srv.Started() {
		t.Skip("needs the server the tests start (SQLKV_DSN is set)")
	}
	return srv
}
