package main

import (
	"errors"
	"flag"
	"io/fs"
	"path/filepath"

	"github.com/tipkv/tipkv"
)

var backupCommand = &command{
	name:    "backup",
	args:    []string{"DIR", "DEST"},
	summary: "copy a store to DEST, a store of its own",
	help: `
Writes a checkpoint of the store in DIR to DEST: tables are hard-linked
where DEST is on the same file system (the copy then takes little space
until compactions replace them), copied otherwise, and the write-ahead
log is copied. DEST must not exist, or be an empty directory. The copy is
an ordinary store: every tipkv command reads it, and restoring is opening
it (or moving it into place) while the service is stopped.

backup opens DIR read-only, so it runs while the service that owns the
store is stopped. A running service backs up its store itself with
DB.Checkpoint, while it writes (see README.md, Operating tipkv); tipkv then
reads that copy.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		return func(c *ctx, args []string) int { return backup(c, args[0], args[1]) }
	},
}

func backup(c *ctx, dir, dest string) int {
	s, code := c.openStore(dir, false)
	if s == nil {
		return code
	}
	defer s.close()
	if err := s.db.Checkpoint(dest); err != nil {
		if errors.Is(err, tipkv.ErrInvalid) {
			return c.usagef("%v", err)
		}
		return c.failf(exitFail, "%v", err)
	}
	files, bytes, err := dirSize(dest)
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	if c.json {
		err = writeJSON(c.stdout, object{{"dir", dir}, {"dest", dest}, {"files", files}, {"bytes", bytes}})
	} else {
		t := newTable(c.stdout)
		t.row("backed up", dir)
		t.row("to", dest)
		t.row("files", files)
		t.row("size", size(bytes)+" (tables hard-linked where they could be take no new space)")
		err = t.flush()
	}
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	return exitOK
}

// dirSize counts the files in dir and their bytes.
func dirSize(dir string) (files int, bytes uint64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		bytes += uint64(info.Size())
		return nil
	})
	return files, bytes, err
}
