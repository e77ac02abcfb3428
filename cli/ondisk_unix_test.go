//go:build unix

package cli

import (
	"os"
	"syscall"
)

// onDisk is the bytes the file takes on disk: its blocks, as du counts.
func onDisk(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Blocks) * 512
	}
	return uint64(fi.Size())
}
