package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/queue"
)

// Enqueues leave the queue-state key alone (a key far from the messages in
// every flushed table made Pebble compact tables it could otherwise move
// down whole), and Close stores it, counting every message, so that the
// next Open walks none of them.
func TestQueueStateStoredAtCloseNotByEnqueues(t *testing.T) {
	dir := t.TempDir()
	db, err := tipkv.Open(dir, &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	q, err := queue.Open(db, "q", &queue.Options[int]{})
	require.NoError(t, err)
	const n = 5000 // several times what one state write covered before
	for i := 0; i < n; i += 100 {
		push(t, db, q, make([]int, 100)...)
	}
	stateKey := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), "q")
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	_, err = s.Get(stateKey)
	require.ErrorIs(t, err, engine.ErrNotFound, "no enqueue writes the state key")
	require.NoError(t, db.Close())

	db, err = tipkv.Open(dir, &tipkv.Options{NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	st := storedState(t, db, "q") // Close stored it
	require.True(t, st.Counted)
	require.Equal(t, int64(n), st.Count, "the stored count covers every message")
	require.Equal(t, int64(n+1), st.CountTo, "up to the tail: Open walks none of them")
	q, err = queue.Open(db, "q", &queue.Options[int]{})
	require.NoError(t, err)
	require.Equal(t, n, q.Len())
}
