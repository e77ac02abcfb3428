//go:build unix

package pebblestore

import (
	"os"
	"syscall"
)

// allocated returns the bytes the file system allocated to the file fi
// describes: its 512-byte blocks (st_blocks), whatever the block size.
func allocated(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Blocks) * 512, true
}
