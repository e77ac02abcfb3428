package sharedstore_test

import (
	"testing"

	"github.com/tipkv/tipkv/engine/enginetest"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
)

// The shared handles honour the contract, with a second handle standing in
// for a second process.
func TestConformance(t *testing.T) {
	enginetest.Run(t, testutil.SharedHarness("shared-watch", sharedstore.Options{}))
	enginetest.Run(t, testutil.SharedHarness("shared-poll", sharedstore.Options{NoWatch: true, MaxBatchOps: 64}))
}
