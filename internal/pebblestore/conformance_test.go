package pebblestore_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/engine/enginetest"
	"github.com/tipkv/tipkv/internal/pebblestore"
)

func TestConformance(t *testing.T) {
	enginetest.Run(t, enginetest.Harness{Open: func(t testing.TB) engine.Store {
		s, err := pebblestore.Open("db", pebblestore.Config{FS: vfs.NewMem(), CacheSize: 8 << 20})
		require.NoError(t, err)
		return s
	}})
}
