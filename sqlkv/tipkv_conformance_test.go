package sqlkv_test

import (
	"testing"
	"time"

	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/engine/enginetest"
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
			tipkvtest.Run(t, harness(m.cfg, scale))
		})
	}
}

// harness runs the suites on tables made with cfg: each store on a new
// table; Second and Reopen open the table again with another pool and
// memory of their own, as another process (or this one restarted) would.
func harness(cfg sqlkv.Config, scale int) enginetest.Harness {
	another := func(t testing.TB, s engine.Store) engine.Store { return second(t, s) }
	return enginetest.Harness{
		Name:   "sqlkv",
		Open:   func(t testing.TB) engine.Store { return openStore(t, cfg) },
		Second: another,
		Reopen: another,
		Scale:  scale,
	}
}
