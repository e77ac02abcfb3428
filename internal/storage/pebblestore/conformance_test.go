package pebblestore_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/internal/storage"
	"github.com/tipkv/tipkv/internal/storage/pebblestore"
	"github.com/tipkv/tipkv/internal/storage/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{Open: func(t testing.TB) storage.Store {
		s, err := pebblestore.Open("db", pebblestore.Config{FS: vfs.NewMem(), CacheSize: 8 << 20})
		require.NoError(t, err)
		return s
	}})
}
