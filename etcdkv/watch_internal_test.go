package etcdkv

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// A watch from a revision the cluster has compacted closes: it could not
// promise that nothing was missed.
func TestWatchFromCompactedRevision(t *testing.T) {
	s := OpenForTest(t, Config{})
	lo := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "w")
	hi := codec.PrefixEnd(lo)
	ctx := context.Background()
	old, err := s.Revision(ctx)
	require.NoError(t, err)
	// Compact(r) keeps revision r: compact past the first write after old.
	mustApply(t, s, func(b engine.Batch) { require.NoError(t, b.Set(codec.AppendAsc(lo, 1), nil)) })
	mustApply(t, s, func(b engine.Batch) { require.NoError(t, b.Set(codec.AppendAsc(lo, 2), nil)) })
	now, err := s.Revision(ctx)
	require.NoError(t, err)
	require.NoError(t, s.CompactRevisions(ctx, now))
	ch, err := s.watchFrom(ctx, lo, hi, old+1)
	require.NoError(t, err)
	for range ch { // at most a wake-up, then closed
	}
}
