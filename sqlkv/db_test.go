package sqlkv_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/sqlkv"
)

// Open returns a *tipkv.DB in shared mode on the table; a second Open of
// the same table (another process) finds the store's format there.
func TestOpenDB(t *testing.T) {
	cfg := sqlkv.Config{DSN: dsn(t), Table: newTable(t)}
	db, err := sqlkv.Open(context.Background(), cfg, nil)
	require.NoError(t, err)
	other, err := sqlkv.Open(context.Background(), cfg, nil)
	require.NoError(t, err)
	require.Contains(t, db.EngineReport(), "sqlkv postgres table "+cfg.Table)
	require.NoError(t, db.Compact())
	require.NotZero(t, db.DiskUsage())
	require.NoError(t, other.Close())
	require.NoError(t, db.Close())
}
