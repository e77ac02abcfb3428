package sqlkv_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The example program runs against the tests' server, with its DSN from
// TIPKV_DSN, and checks itself (every event exactly once). Skipped with
// -short: it builds the program.
func TestExampleOutboxProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs examples/outbox")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	bin := filepath.Join(t.TempDir(), "outbox")
	out, err := exec.Command(goBin, "build", "-o", bin, "./examples/outbox").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(bin, "-d", "1s", "-table", newTable(t))
	cmd.Env = append(cmd.Environ(), "TIPKV_DSN="+dsn(t))
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "each exactly once")
	require.Contains(t, string(out), "version 2, status \"placed\", published true")
	t.Logf("%s", out)
}
