package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
)

func TestCheckHealthy(t *testing.T) {
	dir := sample(t)
	out := cliOK(t, "check", dir)
	require.Equal(t, "checked 16 keys (3 documents, 5 events, 3 queue messages): healthy\n", out)
	m := jsonOf(t, cliOK(t, "check", "--json", dir))
	require.Equal(t, true, m["healthy"])
	require.EqualValues(t, 0, m["problem_count"])
	require.Empty(t, m["problems"])

	// Pruned documents start above version 1: still dense.
	dir = writeStore(t, func(db *tipkv.DB) {
		set(t, db, vkey("c", "d", 7), mp(t, 7), vkey("c", "d", 8), mp(t, 8))
	})
	cliOK(t, "check", dir)
}

// Every kind of problem check finds, each named with its key; exit 1.
func TestCheckProblems(t *testing.T) {
	dir := problemStore(t)
	out, errOut, code := cli(t, "check", dir, "--raw", "raw,other")
	require.Equal(t, exitFail, code, "%s%s", out, errOut)
	require.Empty(t, errOut)
	for _, want := range []string{
		`versions +versions +c \| gap \| 2 +versions 5 then 2: 3 to 4 missing`,
		`value +versions +c \| text \| 1 +not msgpack: 9 bytes left after the msgpack value`,
		`versions +versions +c \| zero \| 0 +version 0 is below 1`,
		`value +feed +s \| 1 +not msgpack: msgpack: unknown code c1`,
		`key +versions +0x016300 +bad collection segment: .*segment ends inside an escape`,
		`key +0x0e +0x0e +unknown family 0x0e`,
		`value +queue-items +q \| 4 +queue value: tipkv: corrupt data: value does not start with tag 0x01`,
		`value +queue-state +bad +queue state: tipkv: corrupt data: queue state: bad head`,
		`value +dead-letters +q \| 2 +a corrupt queue message, quarantined`,
		`queue +queue-items +q \| 1 +message below the queue's head 3`,
		`queue +queue-state +back +head 7 is past tail 6`,
		`queue +dead-letters +q \| 6 +sequence number 6 is both a message and a dead letter`,
	} {
		require.Regexp(t, "(?m)^"+want, out)
	}
	require.NotContains(t, out, "raw | r", "--raw exempts collection raw")
	require.Contains(t, out, ": 13 problem(s)\n")

	short, _, code := cli(t, "check", dir, "--max", "2", "--raw", "raw")
	require.Equal(t, exitFail, code)
	require.Equal(t, 5, strings.Count(short, "\n"), "a header, 2 problems, the rest counted, a verdict:\n%s", short)
	require.Contains(t, short, "... and 11 more (--max)")

	out, _, code = cli(t, "check", "--json", dir)
	require.Equal(t, exitFail, code)
	m := jsonOf(t, out)
	require.Equal(t, false, m["healthy"])
	require.EqualValues(t, 14, m["problem_count"], "without --raw, collection raw's text is a problem too")
	first := m["problems"].([]any)[1].(map[string]any)
	require.Equal(t, "versions", first["kind"])
	require.Equal(t, "c", first["collection"])
	require.Equal(t, "gap", first["id"])
	require.EqualValues(t, 2, first["version"])
	require.NotEmpty(t, first["key_hex"])
}

func TestCheckMissingFormatKey(t *testing.T) {
	dir := noFormatKeyStore(t)
	// A store whose marker says it was created but whose format key is
	// gone has lost its data: it does not open, and check says it is
	// unhealthy (corrupt), not that it could not run.
	out, errOut, code := cli(t, "check", dir)
	require.Equal(t, exitFail, code)
	require.Empty(t, errOut)
	require.Regexp(t, `(?m)^read +store +- +.*lost its data`, out)
	require.Contains(t, out, "checked 0 keys (0 documents, 0 events, 0 queue messages): 1 problem(s)\n")
}

// corruptStore writes a store of one sstable whose middle holds versions
// (meta keys come first, feed events last), and returns a copy of it with
// one byte flipped at offset off of the sstable (negative: from the end).
func corruptStore(t *testing.T, off int) string {
	t.Helper()
	dir := writeStore(t, func(db *tipkv.DB) {
		for i := range 5 {
			set(t, db, fkey("clicks", t0.Add(time.Duration(i)*time.Minute).UnixNano()), mp(t, i))
		}
		for v := int64(1); v <= 2000; v++ {
			set(t, db, vkey("c", "d", v), mp(t, fmt.Sprintf("%x", v*v*v*7919)))
		}
		require.NoError(t, db.Compact())
	})
	ssts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NoError(t, err)
	require.Len(t, ssts, 1)
	b, err := os.ReadFile(ssts[0])
	require.NoError(t, err)
	require.Greater(t, len(b), 16<<10, "several data blocks")
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0xff
	require.NoError(t, os.WriteFile(ssts[0], b, 0o644))
	return dir
}

// A store check cannot read is unhealthy, with exit status 1 and the
// error, never a crash: a corrupt data block fails the read of its
// family, and the other families are still checked.
func TestCheckCorruptBlock(t *testing.T) {
	dir := corruptStore(t, 20<<10)
	out, errOut, code := cli(t, "check", dir)
	require.Equal(t, exitFail, code, "%s%s", out, errOut)
	require.Empty(t, errOut)
	require.Regexp(t, `(?m)^read +versions +- +tipkv: corrupt data: .*checksum mismatch.*\.sst`, out)
	require.Regexp(t, `(?m)^checked \d+ keys \(1 documents, 5 events, 0 queue messages\): 1 problem\(s\)$`, out, "the feed after the versions is checked")

	out, _, code = cli(t, "check", "--json", dir)
	require.Equal(t, exitFail, code)
	m := jsonOf(t, out)
	require.Equal(t, false, m["healthy"])
	require.EqualValues(t, 5, m["events"])
	p := m["problems"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"kind": "read", "family": "versions", "detail": p["detail"]}, p)
	require.Contains(t, p["detail"], "corrupt data")
}

// A corrupt sstable footer fails Open itself: check, run as its own
// process, reports the store unhealthy with exit status 1; it neither
// exits from inside Pebble nor panics.
func TestCheckCorruptFooterBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := corruptStore(t, -20)
	cmd := exec.Command(tipkvBinary(t), "check", "--json", dir)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, exitFail, exit.ExitCode(), "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	require.Empty(t, errOut.String())
	m := jsonOf(t, out.String())
	require.Equal(t, false, m["healthy"])
	p := m["problems"].([]any)[0].(map[string]any)
	require.Equal(t, "read", p["kind"])
	require.Equal(t, "store", p["family"])
	require.Contains(t, p["detail"], "footer corrupted")

	// Every other command says the store is corrupt, exit status 2.
	cmd = exec.Command(tipkvBinary(t), "stats", "--json", dir)
	errOut.Reset()
	cmd.Stderr = &errOut
	require.ErrorAs(t, cmd.Run(), &exit)
	require.Equal(t, exitUsage, exit.ExitCode())
	require.Equal(t, "corrupt", jsonOf(t, errOut.String())["kind"])
}
