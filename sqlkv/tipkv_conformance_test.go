package sqlkv_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/tipkvtest"
)

// tipkv's own conformance suite (documents, feeds, queues, the outbox,
// misuse) on PostgreSQL: every test on a table of its own; Reopen closes
// the DB and opens the table again, as a restarted process would; Second
// opens the table with another pool and memory of its own, as another
// process would.
//
// The default mapping runs at full size, the others at a quarter of it
// (the store-level matrix, TestConformance, runs every mapping at full
// size). With -short, only the default mapping and polling run, at a
// quarter and an eighth: the queue model alone takes 90 s at full size
// under -race on the busy 2-core CI, where the module's whole -short run
// must stay within a few minutes.
func TestConformanceTipkv(t *testing.T) {
	matrix := []struct {
		name  string
		cfg   sqlkv.Config
		scale int
		short int // the scale with -short; 0: skipped
	}{
		{"read-committed", sqlkv.Config{}, 1, 4},
		{"polling", sqlkv.Config{NoWatch: true, PollInterval: 5 * time.Millisecond}, 4, 8},
		{"serializable", sqlkv.Config{Isolation: sqlkv.Serializable}, 4, 0},
		{"repeatable-read", sqlkv.Config{Isolation: sqlkv.RepeatableRead}, 4, 0},
		{"small-batches", sqlkv.Config{MaxBatchOps: 128, MaxBatchBytes: 1 << 20}, 4, 0},
	}
	for _, m := range matrix {
		t.Run(m.name, func(t *testing.T) {
			scale := m.scale
			if testing.Short() {
				if m.short == 0 {
					t.Skip("-short: the default mapping and polling only")
				}
				scale = m.short
			}
			tipkvtest.Run(t, tipkvBackend(m.cfg, scale))
		})
	}
}

// tipkvBackend is the conformance Backend on tables made with cfg.
func tipkvBackend(cfg sqlkv.Config, scale int) tipkvtest.Backend {
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
	return tipkvtest.Backend{
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
