//go:build !race

package tipkvtest

// raceEnabled is whether the race detector is on: the heavier tests then
// run at a smaller size.
const raceEnabled = false
