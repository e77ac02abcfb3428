package sqlkv_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/conformance"
	"github.com/tipkv/tipkv/sqlkv"
)

// tipkv's own conformance suite (documents, feeds, queues, the outbox,
// misuse) on PostgreSQL: every test on a table of its own; Reopen closes
// the DB and opens the table again, as a restarted process would; Second
// opens the table with another pool and memory of its own, as another
// process would.
//
// The default mapping runs at full size. The other mappings run the same
// tests at a quarter of the size (the dialect matrix at the store level
// runs at full size in TestConformance); with -short only the default
// and polling run, so that the module's race run stays within minutes on
// a busy 2-core machine.
func TestConformanceTipkv(t *testing.T) {
	matrix := []struct {
		name  string
		cfg   sqlkv.Config
		scale int
		short bool // runs with -short too
	}{
		{"read-committed", sqlkv.Config{}, 1, true},
		{"polling", sqlkv.Config{NoWatch: true, PollInterval: 5 * time.Millisecond}, 4, true},
		{"serializable", sqlkv.Config{Isolation: sqlkv.Serializable}, 4, false},
		{"repeatable-read", sqlkv.Config{Isolation: sqlkv.RepeatableRead}, 4, false},
		{"small-batches", sqlkv.Config{MaxBatchOps: 128, MaxBatchBytes: 1 << 20}, 4, false},
	}
	for _, m := range matrix {
		t.Run(m.name, func(t *testing.T) {
			if testing.Short() && !m.short {
				t.Skip("-short: the default mapping and polling only")
			}
			conformance.Run(t, tipkvBackend(m.cfg, m.scale))
		})
	}
}

// tipkvBackend is the conformance Backend on tables made with cfg.
func tipkvBackend(cfg sqlkv.Config, scale int) conformance.Backend {
	var mu sync.Mutex
	tables := map[*tipkv.DB]sqlkv.Config{}
	open := func(t testing.TB, c sqlkv.Config, opts *tipkv.Options) *tipkv.DB {
		t.Helper()
		db, err := sqlkv.Open(context.Background(), c, opts)
		require.NoError(t, err)
		mu.Lock()
		tables[db] = c
		mu.Unlock()
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	configOf := func(t testing.TB, db *tipkv.DB) sqlkv.Config {
		mu.Lock()
		defer mu.Unlock()
		c, ok := tables[db]
		require.True(t, ok, "a DB the backend did not open")
		return c
	}
	return conformance.Backend{
		Name: "sqlkv",
		Open: func(t testing.TB, opts *tipkv.Options) *tipkv.DB {
			c := cfg
			c.DSN, c.Table = dsn, newTable()
			return open(t, c, opts)
		},
		Reopen: func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB {
			c := configOf(t, db)
			_ = db.Close()
			return open(t, c, opts)
		},
		Second: func(t testing.TB, db *tipkv.DB, opts *tipkv.Options) *tipkv.DB {
			return open(t, configOf(t, db), opts)
		},
		Scale: scale,
	}
}
