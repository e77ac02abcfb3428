package crash_test

import (
	"cmp"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

// openFS opens a DB in dir on fs (a crashable file system) as tipkv.Open
// opens one on disk: the same Pebble store with its marker file, the same
// defaults of the options Pebble takes, the store marked created once its
// format is written. From outside the root package it goes through
// tipkv.OpenEngine, which leaves out one check of Open: that a store
// whose marker says it was created still holds its format key (misuse_test
// covers that refusal; here a lost write fails the test's own checks).
func openFS(dir string, fs vfs.FS, opts *tipkv.Options) (*tipkv.DB, error) {
	var o tipkv.Options
	if opts != nil {
		o = *opts
	}
	ps, err := pebblestore.Open(dir, pebblestore.Config{
		FS:            fs,
		CacheSize:     cmp.Or(o.CacheSize, 128<<20),
		MemTableSize:  cmp.Or(o.MemTableSize, 16<<20),
		ReadOnly:      o.ReadOnly,
		Logger:        o.Logger,
		FormatVersion: tipkv.FormatVersion,
	})
	if err != nil {
		return nil, err
	}
	db, err := tipkv.OpenEngine(ps, dir, &o)
	if err != nil {
		_ = ps.Close()
		return nil, err
	}
	if !o.ReadOnly {
		if err := ps.Created(); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return db, nil
}
