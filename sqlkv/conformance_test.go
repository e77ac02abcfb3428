package sqlkv_test

import (
	"testing"
	"time"

	"github.com/tipkv/tipkv/engine/enginetest"
	"github.com/tipkv/tipkv/sqlkv"
)

// The contract's suite, at full size, on every mapping the store offers:
// each test on a table of its own, with a second store (another pool, as
// another process) on the same table.
func TestConformance(t *testing.T) {
	matrix := []struct {
		name string
		cfg  sqlkv.Config
	}{
		{"read-committed", sqlkv.Config{}},
		{"serializable", sqlkv.Config{Isolation: sqlkv.Serializable}},
		{"repeatable-read", sqlkv.Config{Isolation: sqlkv.RepeatableRead}},
		{"polling", sqlkv.Config{NoWatch: true, PollInterval: 5 * time.Millisecond}},
		{"small-batches", sqlkv.Config{MaxBatchOps: 64, MaxBatchBytes: 1 << 20}},
	}
	for _, m := range matrix {
		t.Run(m.name, func(t *testing.T) {
			enginetest.Run(t, harness(m.cfg, 1))
		})
	}
}
