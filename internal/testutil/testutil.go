// Package testutil opens stores for tests and registers their cleanup, and
// holds the small helpers the test packages share (a settable clock, reads
// drained into slices, runs of numbers).
package testutil

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/sharedstore"
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

// OpenShared opens n DB handles on one in-memory store, each declaring a
// shared engine (sharedstore): as if n processes shared an etcd cluster or
// a SQL table. Each handle keeps its own memory. They close when the test
// ends.
func OpenShared(t testing.TB, n int, so sharedstore.Options, opts *tipkv.Options) []*tipkv.DB {
	t.Helper()
	ps, err := pebblestore.Open("shared", pebblestore.Config{InMemory: true, CacheSize: 16 << 20, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, err)
	hub := sharedstore.New(ps, so)
	dbs := make([]*tipkv.DB, n)
	for i := range dbs {
		db, err := tipkv.OpenEngine(hub.Handle(), fmt.Sprintf("shared-%d", i), opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		dbs[i] = db
	}
	return dbs
}

// PutRaw writes one raw key through the Writer seam, as tipkv's packages
// do: in a DB.Update when w is its Batch, alone when w is the DB.
func PutRaw(w tipkv.Writer, key, value string) error {
	return link.Write(w, func(tx *link.Tx) error {
		return tx.Batch.Set([]byte(key), []byte(value))
	})
}
