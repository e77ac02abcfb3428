//go:build unix

package paired

import "syscall"

// cpuClock says cpuNanos is a CPU clock.
const cpuClock = true

// cpuNanos is the CPU time the process has used, user and system, in
// nanoseconds.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
