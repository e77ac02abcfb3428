package tipkv

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// OpenFS opens a DB on fs, for crash tests on vfs.NewCrashableMem.
func OpenFS(dir string, fs vfs.FS, opts *Options) (*DB, error) {
	return open(dir, pebblestore.Config{FS: fs}, opts.withDefaults())
}

// SetUpgradeHook makes f hear each step of every upgrade (see upgradeHook)
// until the returned function is called.
func SetUpgradeHook(f func(db *DB, step string, escaped int)) (restore func()) {
	old := upgradeHook
	upgradeHook = f
	return func() { upgradeHook = old }
}

// SetUpgradeChunk bounds an upgrade's chunks to scan keys read and ops
// values rewritten, until the returned function is called.
func SetUpgradeChunk(scan, ops int) (restore func()) {
	oldScan, oldOps := upgradeScanKeys, upgradeChunkOps
	upgradeScanKeys, upgradeChunkOps = scan, ops
	return func() { upgradeScanKeys, upgradeChunkOps = oldScan, oldOps }
}
