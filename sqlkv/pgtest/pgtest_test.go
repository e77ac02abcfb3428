package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/sqlkv/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The default server accepts connections; its pool configuration names
// the connections; its table names differ.
func TestDefault(t *testing.T) {
	srv := pgtest.Default(t)
	require.Same(t, srv, pgtest.Default(t), "one server per test binary")
	pc, err := srv.PoolConfig("pgtest_default")
	require.NoError(t, err)
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	defer pool.Close()
	var app string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app))
	require.Equal(t, "pgtest_default", app)

	a, b := srv.NewTable(), srv.NewTable()
	require.NotEqual(t, a, b)
	_, err = pool.Exec(ctx, "CREATE TABLE "+pgx.Identifier{a}.Sanitize()+" (k bytea PRIMARY KEY)")
	require.NoError(t, err)
}

// A server that pgtest started survives a crash: it restarts on its data.
func TestCrashAndRestart(t *testing.T) {
	srv := pgtest.Default(t)
	if !srv.Started() {
		t.Skip("needs the server pgtest starts (" + pgtest.DSNEnv + " is set)")
	}
	ctx := context.Background()
	table := pgx.Identifier{srv.NewTable()}.Sanitize()
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, srv.DSN())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	require.NoError(t, exec("CREATE TABLE "+table+" (n int)"))
	require.NoError(t, exec("INSERT INTO "+table+" VALUES (1)"))
	require.NoError(t, srv.Crash())
	require.Error(t, exec("SELECT 1"), "the server is down")
	require.NoError(t, srv.Restart())
	conn, err := pgx.Connect(ctx, srv.DSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT n FROM "+table).Scan(&n))
	require.Equal(t, 1, n, "a committed row outlives the crash")
}

// With DSNEnv set, Start uses that server, after checking that it
// answers, and will not stop it; a DSN that names no server is refused at
// Start, naming the variable.
func TestServerFromEnvironment(t *testing.T) {
	srv := pgtest.Default(t)
	t.Setenv(pgtest.DSNEnv, srv.DSN())
	other, err := pgtest.Start()
	require.NoError(t, err)
	require.False(t, other.Started())
	require.Equal(t, srv.DSN(), other.DSN())
	require.Equal(t, srv.Env(), other.Env())
	require.ErrorIs(t, other.Crash(), pgtest.ErrNotStarted)
	require.ErrorIs(t, other.Restart(), pgtest.ErrNotStarted)
	require.NoError(t, other.Close())

	t.Setenv(pgtest.DSNEnv, "host=127.0.0.1 port=1 user=postgres connect_timeout=5")
	_, err = pgtest.Start()
	require.ErrorContains(t, err, pgtest.DSNEnv)
}

// A pair commits on the primary through the multi-host DSN, the commit is
// on the standby before it returns, and after the primary is killed and
// the standby promoted the same DSN reaches the standby, which holds it
// and accepts writes.
func TestPairFailover(t *testing.T) {
	p, err := pgtest.StartPair()
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.DSN())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE t (v int)")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	require.NoError(t, p.KillPrimary())
	require.NoError(t, p.Promote())
	conn, err = pgx.Connect(ctx, p.DSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM t WHERE v = 1").Scan(&n))
	require.Equal(t, 1, n, "the acknowledged insert is on the promoted standby")
	_, err = conn.Exec(ctx, "INSERT INTO t VALUES (2)")
	require.NoError(t, err, "the promoted standby accepts writes")
}
