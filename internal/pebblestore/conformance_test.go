package pebblestore_test

import (
	"testing"

	"github.com/tipkv/tipkv/engine/enginetest"
	"github.com/tipkv/tipkv/internal/testutil"
)

func TestConformance(t *testing.T) {
	enginetest.Run(t, testutil.PebbleMemHarness())
}
