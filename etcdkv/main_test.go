package etcdkv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/etcdkv/etcdtest"
	"github.com/tipkv/tipkv/tipkvtest/proctest"
)

// cluster is the test binary's etcd: 3 members, started once in TestMain.
var cluster *etcdtest.Cluster

func TestMain(m *testing.M) {
	etcdtest.ServeMember() // a member process of TestMultiProcess's cluster: never returns
	flag.Parse()
	if fuzzing() || proctest.IsChild() {
		os.Exit(m.Run()) // the fuzz target and TestMultiProcess's children need no cluster
	}
	c, err := etcdtest.Start(etcdtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdkv: start the test cluster:", err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	c.Close()
	os.Exit(code)
}

// fuzzing reports whether this process runs a fuzz target (the coordinator
// or a worker).
func fuzzing() bool {
	f, w := flag.Lookup("test.fuzz"), flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() != "" || w != nil && w.Value.String() == "true"
}

// ClusterForTest returns the test binary's cluster (black-box tests use it).
func ClusterForTest() *etcdtest.Cluster { return cluster }

var namespaces atomic.Int64

// NamespaceForTest returns a namespace no other test uses.
func NamespaceForTest(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/test/%s/%d/", name, namespaces.Add(1))
}

// OpenForTest opens a store on the test cluster, in a namespace of its own
// unless cfg names one, and closes it when the test ends.
func OpenForTest(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = NamespaceForTest(t)
	}
	if cfg.Client == nil && cfg.Endpoints == nil {
		cfg.Endpoints = cluster.Endpoints()
	}
	s, err := NewStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, engine.ErrClosed) {
			t.Error(err)
		}
	})
	return s
}
