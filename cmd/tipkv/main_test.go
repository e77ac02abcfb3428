package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/cli"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/etcdkv/etcdtest"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/sqlkv/pgtest"
	"github.com/tipkv/tipkv/versioned"
)

// runCLI runs the command line as the binary does and returns its output
// and exit status.
func runCLI(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = cli.Main(args, &out, &errOut, &cli.Options{Engines: engines()})
	return out.String(), errOut.String(), code
}

type page struct {
	Title string `msgpack:"title"`
}

// The binary reaches a store on etcd by its endpoints and namespace: the
// history a service wrote through etcdkv reads back, another namespace of
// the same cluster holds no store (exit 2, and nothing is written there),
// and compact is refused before anything is opened.
func TestEtcdStore(t *testing.T) {
	c, err := etcdtest.Start(etcdtest.Options{Members: 1})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	db, err := etcdkv.Open(context.Background(), etcdkv.Config{Endpoints: c.Endpoints(), Namespace: "/wiki/"}, nil)
	require.NoError(t, err)
	pages, err := versioned.NewCollection[page](db, "pages", nil)
	require.NoError(t, err)
	for _, title := range []string{"Home", "Home page"} {
		_, err = pages.Put(db, "home", page{title})
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	hosts := strings.Join(hostsOf(t, c.Endpoints()), ",")
	out, errOut, code := runCLI("history", "--json", "etcd://"+hosts+"/wiki/", "pages", "home")
	require.Equal(t, 0, code, errOut)
	var h struct {
		Latest   int64 `json:"latest"`
		Versions []struct {
			Version int64          `json:"version"`
			Value   map[string]any `json:"value"`
		} `json:"versions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &h))
	require.Equal(t, int64(2), h.Latest)
	require.Equal(t, "Home page", h.Versions[0].Value["title"])
	_, errOut, code = runCLI("check", "etcd://"+hosts+"/wiki/")
	require.Equal(t, 0, code, errOut)

	_, errOut, code = runCLI("stats", "etcd://"+hosts+"/other/")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "no tipkv store")
	_, errOut, code = runCLI("compact", "etcd://"+hosts+"/wiki/")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "works on a Pebble directory")
}

// The binary reaches a store on PostgreSQL by its DSN and table: the
// history reads back while the writer's DB is still open (a live store),
// a table that holds no store is refused, and the DSN's password never
// appears in a message.
func TestPostgresStore(t *testing.T) {
	srv, err := pgtest.Start()
	require.NoError(t, err, "PostgreSQL for the tests (sqlkv/install-postgres.sh installs it)")
	table := srv.NewTable()
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	db, err := sqlkv.Open(context.Background(), sqlkv.Config{DSN: srv.DSN(), Table: table}, &tipkv.Options{Clock: func() time.Time { return at }})
	require.NoError(t, err)
	defer db.Close()
	pages, err := versioned.NewCollection[page](db, "pages", nil)
	require.NoError(t, err)
	for _, title := range []string{"Home", "Home page", "Welcome"} {
		_, err = pages.Put(db, "home", page{title})
		require.NoError(t, err)
	}

	u, err := url.Parse(srv.DSN())
	require.NoError(t, err)
	q := u.Query()
	q.Set(tableParam, table)
	u.RawQuery = q.Encode()
	out, errOut, code := runCLI("history", u.String(), "pages", "home", "-n", "2")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, `VERSION  TIME                            VALUE
3        2026-11-26T12:00:00.000000002Z  {"title":"Welcome"}
2        2026-11-26T12:00:00.000000001Z  {"title":"Home page"}
`, out, "one clock reading per Update, forced 1 ns past the version before")

	q.Set(tableParam, srv.NewTable())
	u.RawQuery = q.Encode()
	u.User = url.UserPassword(u.User.Username(), "s3cret")
	_, errOut, code = runCLI("stats", u.String())
	require.Equal(t, 2, code, errOut)
	require.NotContains(t, errOut, "s3cret")
}

func hostsOf(t *testing.T, endpoints []string) []string {
	var hosts []string
	for _, e := range endpoints {
		u, err := url.Parse(e)
		require.NoError(t, err)
		hosts = append(hosts, u.Host)
	}
	return hosts
}

// DSNs and endpoint lists become the engines' configurations: the table
// parameter is taken out of the DSN, an etcd path is the namespace as is.
func TestTargets(t *testing.T) {
	cfg, err := postgresConfig("postgres://u:p@h:5432/db?sslmode=disable&table=shop.orders")
	require.NoError(t, err)
	require.Equal(t, "shop.orders", cfg.Table)
	require.Equal(t, "postgres://u:p@h:5432/db?sslmode=disable", cfg.DSN)
	require.True(t, cfg.NoWatch)

	ec, err := etcdConfig("etcd://a:2379,b:2379/tipkv/orders/")
	require.NoError(t, err)
	require.Equal(t, []string{"http://a:2379", "http://b:2379"}, ec.Endpoints)
	require.Equal(t, "/tipkv/orders/", ec.Namespace)
	ec, err = etcdConfig("etcd://a:2379")
	require.NoError(t, err)
	require.Empty(t, ec.Namespace)
	_, err = etcdConfig("etcd:///ns/")
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	require.True(t, isPostgres("postgresql://h/db"))
	require.False(t, isPostgres("/var/lib/postgres"))
	require.False(t, isEtcd("./etcd"))
}
