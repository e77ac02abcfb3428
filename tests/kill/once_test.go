package kill_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/tipkvtest/proctest"
)

// onceDirEnv tells TestKillOnceChild its directory.
const onceDirEnv = "TIPKV_KILL_ONCE_DIR"

// A real process enqueuing with idempotency keys (synced writes, on the
// DB and inside Updates), SIGKILLed at a random point, three times over
// one directory: after each kill the store reopens, every acknowledged key
// holds its acknowledged sequence number, writing every key again returns
// the first number and no second message, and the queue holds one message
// per key (proctest.RunOnce).
func TestKillOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	proctest.RunOnce(t, proctest.OnceConfig{Child: "TestKillOnceChild", Env: []string{onceDirEnv + "=" + dir}},
		func(t *testing.T) *tipkv.DB {
			db, err := tipkv.Open(dir, nil)
			require.NoError(t, err, "reopen after SIGKILL")
			return db
		})
}

// TestKillOnceChild is a child process of TestKillOnce.
func TestKillOnceChild(t *testing.T) {
	proctest.OnceChild(t, func(context.Context) (*tipkv.DB, error) {
		return tipkv.Open(os.Getenv(onceDirEnv), nil)
	})
}
