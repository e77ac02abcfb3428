package etcdkv_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/etcdkv"
)

// Status, DiskUsage and Metrics describe every member; Compact compacts
// the history and defragments each member, and the data stays.
func TestAdmin(t *testing.T) {
	s := etcdkv.OpenForTest(t, etcdkv.Config{})
	set(t, s, k(1), []byte("kept"))
	ms, err := s.Status(context.Background())
	require.NoError(t, err)
	require.Len(t, ms, etcdkv.ClusterForTest().Members())
	leaders := 0
	for _, m := range ms {
		require.NoError(t, m.Err)
		require.Positive(t, m.DBSize)
		require.Positive(t, m.DBSizeQuota)
		if m.IsLeader {
			leaders++
		}
	}
	require.Equal(t, 1, leaders)
	size, err := s.DiskUsage()
	require.NoError(t, err)
	require.Positive(t, size)
	text, err := s.Metrics()
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(text, "leader v"), text)

	var admin engine.Admin = s
	require.NoError(t, admin.Flush())
	require.NoError(t, admin.Compact(nil, nil))
	v, err := s.Get(k(1))
	require.NoError(t, err)
	require.Equal(t, "kept", string(v))

	require.NoError(t, s.Close())
	_, err = s.DiskUsage()
	require.ErrorIs(t, err, engine.ErrClosed)
	require.ErrorIs(t, admin.Flush(), engine.ErrClosed)
}
