package cli

import (
	"errors"
	"flag"
	"io"
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
	if code := c.pebbleOnly(dir); code != exitOK {
		return code
	}
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
	v := &backupView{dir: dir, dest: dest}
	var err error
	if v.files, v.bytes, err = dirSize(dest); err != nil {
		return c.failf(exitFail, "%v", err)
	}
	return c.show(v)
}

// backupView is what backup made: the copy and its files.
type backupView struct {
	dir, dest string
	files     int
	bytes     uint64
}

func (v *backupView) json() object {
	return object{{"dir", v.dir}, {"dest", v.dest}, {"files", v.files}, {"bytes", v.bytes}}
}

func (v *backupView) table(w io.Writer) error {
	t := newTable(w)
	t.row("backed up", v.dir)
	t.row("to", v.dest)
	t.row("files", v.files)
	t.row("size", size(v.bytes)+" (tables hard-linked where they could be take no new space)")
	return t.flush()
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
