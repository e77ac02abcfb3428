package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// A deleted document keeps its history, newest version a delete marker:
// check counts the marker as a dense version and not as a bad value, and
// history shows it as deleted.
func TestDeleteMarkers(t *testing.T) {
	dir := writeStore(t, func(db *tipkv.DB) {
		c, err := versioned.NewCollection[string](db, "pages", nil)
		require.NoError(t, err)
		for _, s := range []string{"a", "b"} {
			_, err := c.Put(db, "home", s)
			require.NoError(t, err)
		}
		require.NoError(t, c.Delete(db, "home"))
		_, err = c.Put(db, "about", "x")
		require.NoError(t, err)
		require.NoError(t, c.Delete(db, "about"))
		_, err = c.Put(db, "about", "y")
		require.NoError(t, err)
	})
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
