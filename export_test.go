package tipkv

import "github.com/cockroachdb/pebble/v2/vfs"

// OpenFS opens a DB on fs, for crash tests on vfs.NewCrashableMem.
func OpenFS(dir string, fs vfs.FS, opts *Options) (*DB, error) {
	return open(dir, fs, opts.withDefaults())
}
