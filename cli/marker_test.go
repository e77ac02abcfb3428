package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A deleted document keeps its history, newest version a delete marker:
// check counts the marker as a dense version and not as a bad value, and
// history shows it as deleted.
func TestDeleteMarkers(t *testing.T) {
	dir := deleteMarkerStore(t)
	require.Contains(t, cliOK(t, "check", dir), "healthy")

	require.Equal(t, `VERSION  VALUE
3        (deleted)
2        "b"
1        "a"
`, cliOK(t, "history", dir, "pages", "home"))
	m := jsonOf(t, cliOK(t, "history", "--json", dir, "pages", "about"))
	require.Equal(t, []any{
		map[string]any{"version": 3.0, "value": "y"},
		map[string]any{"version": 2.0, "deleted": true},
		map[string]any{"version": 1.0, "value": "x"},
	}, m["versions"])
}
