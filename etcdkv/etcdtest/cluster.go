// Package etcdtest runs etcd clusters inside the process, for tests,
// benchmarks and examples: members of server/v3/embed on loopback ports,
// with their data in a temporary directory. It also has a TCP proxy that
// can cut a client off from a member at chosen moments.
//
// A cluster is ready in well under a second and stops in about two, so a
// test binary starts one in TestMain and gives each test its own key
// namespace.
package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Options shape a cluster. The zero value is a 3-member cluster with
// etcd's defaults.
type Options struct {
	// Members is the cluster's size. The default is 3.
	Members int
	// MaxTxnOps and MaxRequestBytes are the servers' --max-txn-ops and
	// --max-request-bytes. Zero: etcd's defaults (128 and 1.5 MiB).
	MaxTxnOps, MaxRequestBytes uint
	// UnsafeNoFsync turns fsync off (--unsafe-no-fsync), for speed where
	// durability does not matter. The default is false: members sync.
	UnsafeNoFsync bool
	// ReadyTimeout bounds the start. The default is a minute.
	ReadyTimeout time.Duration
	// Logger receives the members' logs. The default discards them.
	Logger *zap.Logger
}

// Cluster is a running etcd cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	opts    Options
	dir     string
	mu      sync.Mutex
	members []*member
}

type member struct {
	name      string
	dir       string
	peer, cli url.URL
	e         *embed.Etcd // nil while stopped
	started   bool        // started once: restart joins the existing cluster
}

// Start starts a cluster and waits until every member is ready.
func Start(opts Options) (*Cluster, error) {
	if opts.Members <= 0 {
		opts.Members = 3
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	var err error
	// Ports picked free can be taken before etcd binds them: try again
	// with new ones.
	for range 3 {
		var c *Cluster
		if c, err = start(opts); err == nil {
			return c, nil
		}
	}
	return nil, err
}

func start(opts Options) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, dir: dir}
	var initial []string
	for i := range opts.Members {
		m := &member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(dir, fmt.Sprintf("m%d", i))}
		if m.peer, err = freeURL(); err != nil {
			return nil, err
		}
		if m.cli, err = freeURL(); err != nil {
			return nil, err
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peer.String())
	}
	for _, m := range c.members {
		if err := c.startMember(m, strings.Join(initial, ",")); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.waitReady(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func freeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

func (c *Cluster) config(m *member, initial string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.peer}, []url.URL{m.peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.cli}, []url.URL{m.cli}
	cfg.InitialCluster = initial
	cfg.InitialClusterToken = "etcdtest"
	cfg.ClusterState = embed.ClusterStateFlagNew
	if m.started {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(c.opts.Logger.Named(m.name))
	cfg.EnableGRPCGateway = false
	cfg.UnsafeNoFsync = c.opts.UnsafeNoFsync
	if c.opts.MaxTxnOps > 0 {
		cfg.MaxTxnOps = c.opts.MaxTxnOps
	}
	if c.opts.MaxRequestBytes > 0 {
		cfg.MaxRequestBytes = c.opts.MaxRequestBytes
	}
	return cfg
}

func (c *Cluster) initial() string {
	var parts []string
	for _, m := range c.members {
		parts = append(parts, m.name+"="+m.peer.String())
	}
	return strings.Join(parts, ",")
}

func (c *Cluster) startMember(m *member, initial string) error {
	e, err := embed.StartEtcd(c.config(m, initial))
	if err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", m.name, err)
	}
	m.e, m.started = e, true
	return nil
}

func (c *Cluster) waitReady() error {
	timeout := time.After(c.opts.ReadyTimeout)
	for _, m := range c.members {
		if m.e == nil {
			continue
		}
		select {
		case <-m.e.Server.ReadyNotify():
		case err := <-m.e.Err():
			return fmt.Errorf("etcdtest: %s: %w", m.name, err)
		case <-timeout:
			return fmt.Errorf("etcdtest: %s not ready after %v", m.name, c.opts.ReadyTimeout)
		}
	}
	return nil
}

// Endpoints returns the client URLs of every member, running or not.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.cli.String())
	}
	return out
}

// Endpoint returns the client URL of member i.
func (c *Cluster) Endpoint(i int) string { return c.members[i].cli.String() }

// Members is the cluster's size.
func (c *Cluster) Members() int { return len(c.members) }

// Leader returns the index of the member that is leader now, as the
// running members see it, or -1.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.members {
		if m.e != nil && m.e.Server.Leader() == m.e.Server.MemberID() {
			return i
		}
	}
	return -1
}

// Stop stops member i (a graceful close: its data stays for Restart).
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.members[i]; m.e != nil {
		m.e.Close()
		m.e = nil
	}
}

// Restart starts member i again on its data and ports, and waits until it
// is ready (it needs a quorum for that).
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	m := c.members[i]
	if m.e != nil {
		c.mu.Unlock()
		return errors.New("etcdtest: restart of a running member")
	}
	err := c.startMember(m, c.initial())
	c.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-m.e.Server.ReadyNotify():
		return nil
	case err := <-m.e.Err():
		return fmt.Errorf("etcdtest: %s: %w", m.name, err)
	case <-time.After(c.opts.ReadyTimeout):
		return fmt.Errorf("etcdtest: %s not ready after %v", m.name, c.opts.ReadyTimeout)
	}
}

// Close stops every member and removes their data.
func (c *Cluster) Close() {
	c.mu.Lock()
	var wg sync.WaitGroup
	for _, m := range c.members {
		if m.e != nil {
			wg.Add(1)
			go func(e *embed.Etcd) { defer wg.Done(); e.Close() }(m.e)
			m.e = nil
		}
	}
	c.mu.Unlock()
	wg.Wait()
	_ = os.RemoveAll(c.dir)
}
