//go:build !unix

package paired

import "time"

// cpuClock says cpuNanos is a CPU clock.
const cpuClock = false

// cpuNanos is wall time where the platform has no process CPU clock.
func cpuNanos() int64 { return time.Now().UnixNano() }
