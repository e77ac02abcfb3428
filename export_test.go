package tipkv

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// OpenFS opens a DB on fs, for crash tests on vfs.NewCrashableMem.
func OpenFS(dir string, fs vfs.FS, opts *Options) (*DB, error) {
	return open(dir, pebblestore.Config{FS: fs}, opts.withDefaults())
}
