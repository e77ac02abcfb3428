package sqlkv_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/tipkvtest/proctest"
)

// Two processes enqueuing the same keys with idempotency keys on one
// table, racing, SIGKILLed at a random point, three times: after each
// kill a new handle finds every acknowledged key at its acknowledged
// sequence number (the same for both processes), writing every key again
// returns the first number and no second message, and the queue holds one
// message per key (proctest.RunOnce).
func TestKillOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs child processes")
	}
	table := newTable(t)
	openStore(t, sqlkv.Config{Table: table}) // makes the table
	cfg := sqlkv.Config{DSN: dsn(t), Table: table}
	proctest.RunOnce(t, proctest.OnceConfig{
		Child:    "TestKillOnceChild",
		Env:      []string{mpDSNEnv + "=" + dsn(t), mpTableEnv + "=" + table},
		Children: 2,
	}, func(t *testing.T) *tipkv.DB {
		db, err := sqlkv.Open(context.Background(), cfg, nil)
		require.NoError(t, err)
		return db
	})
}

// TestKillOnceChild is a child process of TestKillOnce.
func TestKillOnceChild(t *testing.T) {
	proctest.OnceChild(t, func(ctx context.Context) (*tipkv.DB, error) {
		return sqlkv.Open(ctx, sqlkv.Config{DSN: os.Getenv(mpDSNEnv), Table: os.Getenv(mpTableEnv)}, nil)
	})
}
