//go:build !unix

package cli

import "os"

// onDisk is the file's length: the system does not say its blocks here.
func onDisk(fi os.FileInfo) uint64 { return uint64(fi.Size()) }
