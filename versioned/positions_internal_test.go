package versioned

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/testutil"
)

// Idle streams leave memory once more than knobs.Versioned.StreamEntries are used, and
// come back with the right last position: positions stay unique and
// increasing per stream across evictions.
func TestIdleStreamsAreEvicted(t *testing.T) {
	defer knobs.Set(&knobs.Versioned.StreamEntries, 64)()
	db := testutil.OpenMem(t)
	f, err := NewFeed[string](db, nil)
	require.NoError(t, err)
	last := map[string]int64{}
	for round := range 3 {
		for i := range 500 {
			s := fmt.Sprint("s", i)
			p, err := f.Append(db, s, fmt.Sprint(round))
			require.NoError(t, err)
			require.Greater(t, p, last[s], "stream %s", s)
			last[s] = p
		}
		require.LessOrEqual(t, f.pos.len(), knobs.Versioned.StreamEntries)
	}
	// A stream with a follower stays while the others come and go.
	st := f.pos.pin(namePrefix(0x04, "s0"))
	for i := range 500 {
		_, err := f.Append(db, fmt.Sprint("t", i), "x")
		require.NoError(t, err)
	}
	require.Same(t, st, f.pos.pin(namePrefix(0x04, "s0")))
	f.pos.unpin(st)
	f.pos.unpin(st)
	n := 0
	for e, err := range f.Since("s7", 0, tipkv.Query{}) {
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(n), e.Value)
		n++
	}
	require.Equal(t, 3, n)
}
