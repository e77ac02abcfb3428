package tipkv_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/queuefmt"
	"github.com/tipkv/tipkv/queue"
)

// Enqueues leave the queue-state key alone (a key far from the messages in
// every flushed table made Pebble compact tables it could otherwise move
// down whole), and Close stores it, counting every message, so that the
// next Open walks none of them.
func TestQueueStateStoredAtCloseNotByEnqueues(t *testing.T) {
	fs := vfs.NewMem()
	db, err := tipkv.OpenFS("db", fs, &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	q, err := queue.Open(db, "q", &queue.Options[int]{})
	require.NoError(t, err)
	const n = 5000 // several times what one state write covered before
	for i := 0; i < n; i += 100 {
		require.NoError(t, q.Enqueue(db, make([]int, 100)...))
	}
	stateKey := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "q")
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	_, err = s.Get(stateKey)
	require.ErrorIs(t, err, engine.ErrNotFound, "no enqueue writes the state key")
	require.NoError(t, db.Close())

	db, err = tipkv.OpenFS("db", fs, &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	s, err = link.StoreOf(db)
	require.NoError(t, err)
	v, err := s.Get(stateKey)
	require.NoError(t, err, "Close stores the state")
	st, err := queuefmt.ParseState(v)
	require.NoError(t, err)
	require.True(t, st.Counted)
	require.Equal(t, int64(n), st.Count, "the stored count covers every message")
	require.Equal(t, int64(n+1), st.CountTo, "up to the tail: Open walks none of them")
	q, err = queue.Open(db, "q", &queue.Options[int]{})
	require.NoError(t, err)
	require.Equal(t, n, q.Len())

}
