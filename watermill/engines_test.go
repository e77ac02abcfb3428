package tipkvwatermill_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/etcdkv/etcdtest"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/sqlkv/pgtest"
)

// The suite on the shared engines. The Publishers and Subscribers the
// suite makes are spread over several DB handles on one namespace (etcd)
// or one table (PostgreSQL), as over several processes: consumer groups,
// leases and the topics' cursors are shared through the engine only.

var (
	etcdOnce    sync.Once
	etcdCluster *etcdtest.Cluster
	etcdErr     error
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m) // stops the PostgreSQL server, if a test started one
	if etcdCluster != nil {
		etcdCluster.Close()
	}
	os.Exit(code)
}

// testCluster starts the test binary's etcd cluster (3 members in this
// process) at its first call.
func testCluster(t testing.TB) *etcdtest.Cluster {
	t.Helper()
	etcdOnce.Do(func() { etcdCluster, etcdErr = etcdtest.Start(etcdtest.Options{}) })
	require.NoError(t, etcdErr, "start the etcd test cluster")
	return etcdCluster
}

// processes is how many DB handles a shared-engine suite opens on its
// store: every Publisher and Subscriber the suite makes gets one of them
// in turn, as one of that many processes. (A handle each would open 50
// PostgreSQL pools for TestConcurrentSubscribe, more connections than a
// default server allows.)
const processes = 8

// perProcess returns an open that gives its callers, in turn, one of
// processes DB handles on one store, opened by dial at first use and
// closed when the suite ends.
func perProcess(suite *testing.T, dial func() (*tipkv.DB, error)) func(*testing.T) *tipkv.DB {
	var mu sync.Mutex
	var dbs []*tipkv.DB
	n := 0
	return func(t *testing.T) *tipkv.DB {
		mu.Lock()
		defer mu.Unlock()
		n++
		if len(dbs) < processes {
			db, err := dial()
			require.NoError(t, err)
			suite.Cleanup(func() { _ = db.Close() })
			dbs = append(dbs, db)
			return db
		}
		return dbs[n%processes]
	}
}

func TestPubSubEtcd(t *testing.T) {
	c := testCluster(t)
	ns := fmt.Sprintf("/watermill-test/%d/", time.Now().UnixNano())
	dial := func() (*tipkv.DB, error) {
		return etcdkv.Open(context.Background(), etcdkv.Config{Endpoints: c.Endpoints(), Namespace: ns}, nil)
	}
	runSuite(t, groupFeatures, perProcess(t, dial), false)
}

// TestPubSubPostgres runs the suite on pgtest's PostgreSQL server: one it
// starts in a temporary directory, or the one SQLKV_DSN names (see package
// pgtest), on a table of its own.
func TestPubSubPostgres(t *testing.T) {
	srv := pgtest.Default(t)
	table := srv.NewTable()
	dial := func() (*tipkv.DB, error) {
		return sqlkv.Open(context.Background(), sqlkv.Config{DSN: srv.DSN(), Table: table, MaxConns: 4}, nil)
	}
	runSuite(t, groupFeatures, perProcess(t, dial), false)
}
