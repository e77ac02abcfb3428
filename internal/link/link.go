// Package link connects tipkv's sub-packages to the internals of the root
// package without putting those internals in the public API. The root
// package sets these functions in its init; versioned/ and queue/ call them.
package link

import (
	"time"

	"github.com/tipkv/tipkv/internal/storage"
)

var (
	// Store returns the storage of a *tipkv.DB.
	Store func(db any) (storage.Store, error)
	// Write runs f with the Tx of a tipkv.Writer: a *tipkv.DB commits a new
	// Tx alone after f returns, a *tipkv.Batch passes its own Tx.
	Write func(w any, f func(*storage.Tx) error) error
	// WriteOnce is Write, except that a *tipkv.DB commits f's Tx once and
	// returns a failed condition (storage.ErrConditionFailed) instead of
	// running f again after a pause: for a package that retries in its
	// own way (a queue consumer that lost a race reads again at once).
	WriteOnce func(w any, f func(*storage.Tx) error) error
	// Services returns the per-DB registry where packages keep in-memory
	// state (version caches, queue watermarks) shared by every handle of
	// one DB.
	Services func(db any) (*Registry, error)
	// Clock returns the clock of a *tipkv.DB (Options.Clock).
	Clock func(db any) (func() time.Time, error)
	// LegacyNames reports whether the default value codec of a *tipkv.DB
	// names struct fields as format 1 did (Go names, json tags ignored).
	LegacyNames func(db any) bool
	// Reader returns the storage reader of a *tipkv.DB (the live store) or
	// a *tipkv.Snapshot (its view), and the *tipkv.DB it belongs to.
	Reader func(r any) (storage.Reader, any, error)
	// NewDB returns a *tipkv.DB on an open store, for engines outside the
	// core module (etcdkv, sqlkv) and for tests. opts is a *tipkv.Options
	// or nil; its engine fields (InMemory, CacheSize, MemTableSize) are
	// ignored. The DB owns the store: its Close closes it.
	NewDB func(s storage.Store, name string, opts any) (any, error)
)
