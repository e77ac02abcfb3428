package sqlkv_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/sqlkv"
)

// The tests run on a PostgreSQL server of their own: TestMain finds
// pg_ctl, makes a cluster in a temporary directory (as the postgres user
// when run as root: the server refuses to run as root), starts it on a
// free loopback port and stops it at the end.
//
//	SQLKV_DSN=...          use that server instead (tables are created in it);
//	                       a URL (postgres://...) or key=value pairs
//	SQLKV_ALLOW_SKIP=1     skip, with a message, when PostgreSQL is not installed
//
// Without either, a machine without PostgreSQL fails the tests: run
// sqlkv/install-postgres.sh.
var (
	dsn     string
	pgBin   string // the server's bin directory, when the tests started it
	pgData  string
	pgOpts  string // the server's options, to restart it
	pgLog   string
	pgCred  *syscall.Credential
	tableNo atomic.Int64
	runID   = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if d := os.Getenv("SQLKV_DSN"); d != "" {
		dsn = d
		return m.Run()
	}
	bin := findPostgres()
	if bin == "" {
		if os.Getenv("SQLKV_ALLOW_SKIP") != "" {
			fmt.Println("sqlkv: PostgreSQL is not installed (no pg_ctl under /usr/lib/postgresql/*/bin or on PATH): skipping every test, as SQLKV_ALLOW_SKIP asks")
			return 0
		}
		fmt.Fprintln(os.Stderr, "sqlkv: PostgreSQL is not installed (no pg_ctl under /usr/lib/postgresql/*/bin or on PATH).\nInstall it with sqlkv/install-postgres.sh, point SQLKV_DSN at a server, or set SQLKV_ALLOW_SKIP=1 to skip.")
		return 1
	}
	stop, err := startPostgres(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqlkv: start PostgreSQL:", err)
		return 1
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "sqlkv: stop PostgreSQL:", err)
	}
	return code
}

// findPostgres returns the bin directory of the newest PostgreSQL
// installed, or "".
func findPostgres() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Dir(p)
	}
	return ""
}

// pg runs one of the server's programs, as the postgres user when the
// tests run as root.
func pg(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(pgBin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pgCred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func startPostgres(bin string) (stop func() error, err error) {
	pgBin = bin
	dir, err := os.MkdirTemp("", "sqlkv-pg-")
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and there is no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pgCred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	pgData = filepath.Join(dir, "data")
	if err := pg("initdb", "-D", pgData, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// fsync off: the tests are about semantics, not durability, and the
	// machine is shared. The commit path (and a synchronous standby's
	// wait) is otherwise the same.
	pgOpts = fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB -c autovacuum_naptime=1s", port, dir)
	pgLog = filepath.Join(dir, "log")
	if err := pg("pg_ctl", "-D", pgData, "-o", pgOpts, "-l", pgLog, "-w", "-t", "120", "start"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// If the test binary dies, the server follows it (a watchdog that
	// checks the parent once a second).
	watchdog := exec.Command("sh", "-c", fmt.Sprintf("while [ -d /proc/%d ]; do sleep 1; done; %s -D %s -m immediate stop", os.Getpid(), filepath.Join(bin, "pg_ctl"), pgData))
	watchdog.SysProcAttr = &syscall.SysProcAttr{Credential: pgCred, Setsid: true}
	_ = watchdog.Start()
	dsn = fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", port)
	return func() error {
		err := pg("pg_ctl", "-D", pgData, "-m", "fast", "-w", "stop")
		if watchdog.Process != nil {
			_ = watchdog.Process.Kill()
			_ = watchdog.Wait()
		}
		_ = os.RemoveAll(dir)
		return err
	}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// poolConfig parses dsn, in either of the forms pgx takes (a URL or
// key=value pairs), into a pool configuration whose connections carry
// application_name app, so that a test can tell its own backends in
// pg_stat_activity from everyone else's. The pool's size is pgxpool's
// default unless the DSN sets pool_max_conns.
func poolConfig(t testing.TB, app string) *pgxpool.Config {
	t.Helper()
	pc, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	pc.ConnConfig.RuntimeParams["application_name"] = app
	return pc
}

// newTable returns a table name no other test uses.
func newTable() string {
	return fmt.Sprintf("kv_%s_%d", runID, tableNo.Add(1))
}

// openStore opens a store on a new table with cfg, closed at the end of
// the test.
func openStore(t testing.TB, cfg sqlkv.Config) *sqlkv.Store {
	t.Helper()
	if cfg.DSN == "" && cfg.Pool == nil {
		cfg.DSN = dsn
	}
	if cfg.Table == "" {
		cfg.Table = newTable()
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
	cfg.Pool, cfg.DSN = nil, dsn
	return openStore(t, cfg)
}

// ownServer skips a test that stops, restarts or reconfigures the server
// when the tests did not start it.
func ownServer(t testing.TB) {
	t.Helper()
	if pgBin == "" {
		t.Skip("needs the server the tests start (SQLKV_DSN is set)")
	}
}

// restartServer starts the server again after a test stopped it.
func restartServer(t testing.TB) {
	t.Helper()
	require.NoError(t, pg("pg_ctl", "-D", pgData, "-o", pgOpts, "-l", pgLog, "-w", "-t", "120", "start"))
}
