package sqlkv_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/sqlkv"
)

// The seed article's loop (insert 1,000 rows, delete them, again) on a
// table with sqlkv's autovacuum settings and on one with the server's
// defaults, printing the sizes. A measurement, not a gate (the gate is the
// later churn test of the whole stack): SQLKV_CHURN=rounds to run it.
func TestChurnTableSize(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SQLKV_CHURN"))
	if rounds == 0 {
		t.Skip("a measurement: set SQLKV_CHURN=rounds")
	}
	val := make([]byte, 200)
	for _, defaults := range []bool{false, true} {
		name := newTable(t)
		if defaults {
			conn, err := pgx.Connect(context.Background(), dsn(t))
			require.NoError(t, err)
			_, err = conn.Exec(context.Background(), "CREATE TABLE "+name+" (k bytea PRIMARY KEY, v bytea)")
			require.NoError(t, err)
			conn.Close(context.Background())
		}
		s := openStore(t, sqlkv.Config{Table: name})
		var peak uint64
		for r := range rounds {
			require.NoError(t, apply(s, func(b engine.Batch) {
				for i := range 1000 {
					_ = b.Set(qkey("q", int64(r*1000+i)), val)
				}
			}))
			require.NoError(t, apply(s, func(b engine.Batch) {
				_ = b.DeleteRange(qkey("q", int64(r*1000)), qkey("q", int64(r*1000+1000)))
			}))
			if r%20 == 0 || r == rounds-1 {
				total, _, err := s.Sizes()
				require.NoError(t, err)
				peak = max(peak, total)
			}
		}
		total, index, err := s.Sizes()
		require.NoError(t, err)
		m, _ := s.Metrics()
		t.Logf("defaults=%v: %d rounds: peak %.1f MiB, end %.1f MiB (index %.1f MiB): %s", defaults, rounds, float64(peak)/(1<<20), float64(total)/(1<<20), float64(index)/(1<<20), m)
		fmt.Println()
	}
}
