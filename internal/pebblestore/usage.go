package pebblestore

import (
	"errors"
	"io/fs"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// usage is what the store's directory holds on disk, counted file by file
// (DiskUsage, EngineMetrics). Pebble's own figure adds up what it tracks
// (tables, the manifest, the WAL's size when each log was opened) and so
// misses the blocks preallocated to the live log: on Linux Pebble
// reserves 110% of the memtable size for each new log with fallocate
// (FALLOC_FL_KEEP_SIZE), which the log's length does not show. A store
// holding a few kilobytes took 18 MB, and Pebble said 3 KB.
type usage struct {
	// total is the bytes every file under the directory takes on disk.
	total uint64
	// wal is the bytes the write-ahead log's files take: the live logs and
	// the ones kept for recycling.
	wal uint64
}

// usage walks the store's directory (an in-memory store's too) and adds
// up, for every file under it, the blocks the file system allocated to it
// (st_blocks x 512, what du reports without --apparent-size), or its
// length where the file system does not say (memory, Windows). Files
// deleted during the walk (obsolete tables and logs) are skipped.
func (s *Store) usage() (usage, error) {
	var u usage
	err := walkUsage(s.fs, s.dir, &u)
	return u, err
}

func walkUsage(f vfs.FS, dir string, u *usage) error {
	names, err := f.List(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		path := f.PathJoin(dir, name)
		fi, err := f.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if err := walkUsage(f, path, u); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		n, ok := allocated(fi)
		if !ok {
			n = uint64(fi.Size())
		}
		u.total += n
		if strings.HasSuffix(name, ".log") {
			u.wal += n
		}
	}
	return nil
}
