//go:build race

package testutil

// RaceEnabled is whether the race detector is on: sync.Pool then drops
// items at random, so allocation counts mean nothing, and the heavier
// tests run at a smaller size.
const RaceEnabled = true
