package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/cli"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/sqlkv"
)

// openTimeout bounds how long a command waits for a shared engine to
// answer when it opens the store.
const openTimeout = 15 * time.Second

// engines are the shared engines the command reaches besides Pebble.
func engines() []cli.Engine {
	return []cli.Engine{
		{Name: "PostgreSQL", Match: isPostgres, Open: openPostgres},
		{Name: "etcd", Match: isEtcd, Open: openEtcd},
	}
}

func isPostgres(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// tableParam names the DSN parameter that says which table holds the
// store (sqlkv.Config.Table); the DSN passed to PostgreSQL is without it.
const tableParam = "table"

// postgresConfig returns the sqlkv configuration of a DSN in URL form,
// with its table parameter taken out. The command never listens for
// notifications: it reads and leaves.
func postgresConfig(target string) (sqlkv.Config, error) {
	u, err := url.Parse(target)
	if err != nil {
		return sqlkv.Config{}, fmt.Errorf("%w: a PostgreSQL DSN: %v", tipkv.ErrInvalid, err)
	}
	q := u.Query()
	table := q.Get(tableParam)
	q.Del(tableParam)
	u.RawQuery = q.Encode()
	return sqlkv.Config{DSN: u.String(), Table: table, NoWatch: true}, nil
}

func openPostgres(ctx context.Context, target string, opts *tipkv.Options) (*tipkv.DB, error) {
	cfg, err := postgresConfig(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	return sqlkv.Open(ctx, cfg, opts)
}

func isEtcd(target string) bool { return strings.HasPrefix(target, "etcd://") }

// etcdConfig returns the etcdkv configuration of etcd://host:port[,...]
// [/namespace/]: the path, its slashes included, is etcdkv's
// Config.Namespace (etcd://h:2379/tipkv/orders/ is "/tipkv/orders/").
func etcdConfig(target string) (etcdkv.Config, error) {
	hosts, ns := strings.TrimPrefix(target, "etcd://"), ""
	if i := strings.IndexByte(hosts, '/'); i >= 0 {
		hosts, ns = hosts[:i], hosts[i:] // the path is the namespace, as is
	}
	if ns == "/" {
		ns = ""
	}
	var eps []string
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" {
			continue
		}
		eps = append(eps, "http://"+h)
	}
	if len(eps) == 0 {
		return etcdkv.Config{}, fmt.Errorf("%w: %s names no etcd endpoint (etcd://host:port[,host:port...][/namespace])", tipkv.ErrInvalid, target)
	}
	return etcdkv.Config{Endpoints: eps, Namespace: ns, DialTimeout: openTimeout}, nil
}

func openEtcd(ctx context.Context, target string, opts *tipkv.Options) (*tipkv.DB, error) {
	cfg, err := etcdConfig(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	return etcdkv.Open(ctx, cfg, opts)
}
