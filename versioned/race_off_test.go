//go:build !race

package versioned_test

// raceEnabled is whether the race detector is on.
const raceEnabled = false
