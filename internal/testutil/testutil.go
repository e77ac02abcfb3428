// Package testutil opens stores for tests and registers their cleanup.
package testutil

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
)

// OpenMem opens an in-memory DB closed when the test ends.
func OpenMem(t testing.TB) *tipkv.DB {
	t.Helper()
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// OpenDir opens a DB in a new temporary directory, closed when the test
// ends. It returns the DB and its directory.
func OpenDir(t testing.TB, opts *tipkv.Options) (*tipkv.DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := tipkv.Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db, dir
}
