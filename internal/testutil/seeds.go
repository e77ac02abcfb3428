package testutil

import (
	"flag"
	"math/rand/v2"
	"testing"
)

var crashSeed = flag.Uint64("crash.seed", 0, "replay one crash-test seed")

// CrashSeeds returns the seeds a crash test runs: the one given with
// -crash.seed, or n random ones (each test logs its seed, so a failure can
// be replayed).
func CrashSeeds(t *testing.T, n int) []uint64 {
	t.Helper()
	if *crashSeed != 0 {
		return []uint64{*crashSeed}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = rand.Uint64()
	}
	return seeds
}
