package cli

import (
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// A deleted document keeps its history, newest version a delete marker:
// check counts the marker as a dense version and not as a bad value, and
// history shows it as deleted.
func TestDeleteMarkers(t *testing.T) {
	dir := deleteMarkerStore(t)
	require.Contains(t, cliOK(t, "check", dir), "healthy")

	require.Equal(t, `VERSION  TIME  VALUE
3        T     (deleted)
2        T     "b"
1        T     "a"
`, timesOut(cliOK(t, "history", dir, "pages", "home")))
	m := jsonOf(t, cliOK(t, "history", "--json", dir, "pages", "about"))
	versions := m["versions"].([]any)
	for _, v := range versions {
		require.NotEmpty(t, v.(map[string]any)["time"])
		delete(v.(map[string]any), "time")
	}
	require.Equal(t, []any{
		map[string]any{"version": 3.0, "value": "y"},
		map[string]any{"version": 2.0, "deleted": true},
		map[string]any{"version": 1.0, "value": "x"},
	}, versions)
}

// timesOut replaces the commit times of a history table by T, so that a
// table of versions written by the real clock compares.
func timesOut(out string) string {
	out = regexp.MustCompile(`TIME +`).ReplaceAllString(out, "TIME  ")
	return regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z +`).ReplaceAllString(out, "T     ")
}

// history shows each version's commit time, author and reason, and with
// --at starts at the version latest at a time.
func TestHistoryTimesAndMetadata(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	db, err := tipkv.Open(dir, &tipkv.Options{NoSync: true, Clock: func() time.Time { return now }})
	require.NoError(t, err)
	c, err := versioned.NewCollection[string](db, "pages", nil)
	require.NoError(t, err)
	_, err = c.Put(db, "home", "a")
	require.NoError(t, err)
	now = now.Add(time.Hour)
	_, err = c.Put(tipkv.WithMetadata(db, tipkv.Metadata{Author: "ada", Reason: "typo", Headers: map[string]string{"k": "v"}}), "home", "b")
	require.NoError(t, err)
	_, err = c.Delete(db, "home")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	require.Equal(t, `VERSION  TIME                            AUTHOR  REASON  VALUE
3        2026-11-26T13:00:00.000000001Z  -       -       (deleted)
2        2026-11-26T13:00:00Z            ada     typo    "b"
1        2026-11-26T12:00:00Z            -       -       "a"
`, cliOK(t, "history", dir, "pages", "home"))
	require.Equal(t, `VERSION  TIME                  VALUE
1        2026-11-26T12:00:00Z  "a"
`, cliOK(t, "history", dir, "pages", "home", "--at", "2026-11-26T12:59:59Z"))
	m := jsonOf(t, cliOK(t, "history", "--json", dir, "pages", "home", "--at", "2026-11-26T13:00:00Z"))
	require.Equal(t, map[string]any{"version": 2.0, "time": "2026-11-26T13:00:00Z", "value": "b",
		"meta": map[string]any{"author": "ada", "reason": "typo", "headers": map[string]any{"k": "v"}}}, m["versions"].([]any)[0])
}

// feed shows the author and reason of events appended with metadata, and
// --json the whole of it.
func TestFeedMetadata(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	db, err := tipkv.Open(dir, &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	f, err := versioned.NewFeed[string](db, nil)
	require.NoError(t, err)
	t1 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	_, err = f.AppendAt(db, "s", t1, "a")
	require.NoError(t, err)
	_, err = f.AppendAt(tipkv.WithMetadata(db, tipkv.Metadata{Author: "ada", Reason: "typo", CorrelationID: "r1"}), "s", t1.Add(time.Minute), "b")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	require.Equal(t, `POSITION             TIME                  AUTHOR  REASON  VALUE
1795694460000000000  2026-11-26T12:01:00Z  ada     typo    "b"
1795694400000000000  2026-11-26T12:00:00Z  -       -       "a"
`, cliOK(t, "feed", dir, "s"))
	m := jsonOf(t, cliOK(t, "feed", "--json", dir, "s"))
	require.Equal(t, map[string]any{"position": 1795694460000000000.0, "time": "2026-11-26T12:01:00Z", "value": "b",
		"meta": map[string]any{"author": "ada", "reason": "typo", "correlation_id": "r1"}}, m["events"].([]any)[0])
	require.NotContains(t, m["events"].([]any)[1], "meta")
}
