package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// dump decodes a collection's time index (its state and each entry's
// time and version), and check requires each entry to name a stored
// version with its time: an entry left behind by a version gone is a
// problem of kind index.
func TestTimeIndexDumpAndCheck(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := writeStoreAt(t, func() time.Time { return at }, func(db *tipkv.DB) {
		c, err := versioned.NewCollection[string](db, "pages", nil)
		require.NoError(t, err)
		require.NoError(t, c.EnableTimeIndex(context.Background()))
		_, err = c.Put(db, "home", "hello")
		require.NoError(t, err)
	})
	out := cliOK(t, "dump", "--family", "time-index", "--json", dir)
	lines := jsonLines(t, out)
	require.Len(t, lines, 2, out)
	require.Contains(t, out, `"index":"on"`)
	require.Contains(t, out, `"time":"2026-01-02T03:04:05Z"`)
	require.Contains(t, out, `"version":1`)
	cliOK(t, "check", dir)

	dir = writeStoreAt(t, func() time.Time { return at }, func(db *tipkv.DB) {
		c, err := versioned.NewCollection[string](db, "pages", nil)
		require.NoError(t, err)
		require.NoError(t, c.EnableTimeIndex(context.Background()))
		_, err = c.Put(db, "home", "hello")
		require.NoError(t, err)
		set(t, db, ikey("pages", "gone", at.UnixNano()+1), []byte{0x80, 0, 0, 0, 0, 0, 0, 7})
	})
	stdout, _, code := cli(t, "check", dir)
	require.NotEqual(t, exitOK, code)
	require.Contains(t, stdout, "time index entry of version 7 of \"gone\", which is not stored")
}
