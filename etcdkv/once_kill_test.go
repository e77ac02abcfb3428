package etcdkv_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/tipkvtest/proctest"
)

// Two processes enqueuing the same keys with idempotency keys on the
// in-process cluster, racing, SIGKILLed at a random point, three times:
// after each kill a new handle finds every acknowledged key at its
// acknowledged sequence number (the same for both processes), writing
// every key again returns the first number and no second message, and
// the queue holds one message per key (proctest.RunOnce). sqlkv's
// TestKillOnce is the same on PostgreSQL.
func TestKillOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs child processes")
	}
	eps := etcdkv.ClusterForTest().Endpoints()
	ns := etcdkv.NamespaceForTest(t)
	proctest.RunOnce(t, proctest.OnceConfig{
		Child:    "TestKillOnceChild",
		Env:      []string{mpEnv + "=" + strings.Join(eps, ",") + "|" + ns},
		Children: 2,
	}, func(t *testing.T) *tipkv.DB {
		db, err := etcdkv.Open(context.Background(), etcdkv.Config{Endpoints: eps, Namespace: ns}, nil)
		require.NoError(t, err)
		return db
	})
}

// TestKillOnceChild is a child process of TestKillOnce.
func TestKillOnceChild(t *testing.T) {
	proctest.OnceChild(t, func(ctx context.Context) (*tipkv.DB, error) {
		endpoints, ns, _ := strings.Cut(os.Getenv(mpEnv), "|")
		return etcdkv.Open(ctx, etcdkv.Config{Endpoints: strings.Split(endpoints, ","), Namespace: ns, RequestTimeout: 5 * time.Second}, nil)
	})
}
