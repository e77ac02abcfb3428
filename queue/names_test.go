package queue_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/queue"
)

func names(t *testing.T, db *tipkv.DB) []string {
	t.Helper()
	var out []string
	for name, err := range queue.Names(db) {
		require.NoError(t, err)
		out = append(out, name)
	}
	return out
}

func TestNames(t *testing.T) {
	db := testutil.OpenMem(t)
	require.Empty(t, names(t, db))

	openQ[int](t, db, "never written", nil)
	live := openQ[int](t, db, "live", nil)
	require.NoError(t, live.Enqueue(db, 1, 2, 3))
	emptied := openQ[int](t, db, "emptied", nil)
	require.NoError(t, emptied.Enqueue(db, 1))
	_, err := emptied.Pop(1)
	require.NoError(t, err)
	zero := openQ[int](t, db, "a\x00b", nil)
	require.NoError(t, zero.Enqueue(db, 1))
	dead := openQ(t, db, "dead", &queue.Options[int]{MaxAttempts: 1})
	require.NoError(t, dead.Enqueue(db, 1))
	ms, err := dead.Receive(1, time.Minute)
	require.NoError(t, err)
	require.NoError(t, dead.Release(ms[0].ID, 0))
	ms, err = dead.Receive(1, time.Minute)
	require.NoError(t, err)
	require.Empty(t, ms)
	require.Len(t, deadLetters(t, dead), 1)

	// Keys of one family each, written raw: a queue with only dead
	// letters, only a state key, only items; and keys of other families.
	s, err := link.Store(db)
	require.NoError(t, err)
	b := s.NewBatch()
	key := func(f codec.Family, name string, seq int64) []byte {
		k := codec.AppendString(codec.AppendFamily(nil, f), name)
		if seq > 0 {
			k = codec.AppendAsc(k, seq)
		}
		return k
	}
	require.NoError(t, b.Set(key(codec.FamilyDeadLetters, "only dead", 7), []byte("x")))
	require.NoError(t, b.Set(key(codec.FamilyDeadLetters, "only dead", 9), []byte("x")))
	require.NoError(t, b.Set(key(codec.FamilyQueueState, "only state", 0), []byte("x")))
	require.NoError(t, b.Set(key(codec.FamilyQueueItems, "only items", 1), []byte("x")))
	require.NoError(t, b.Set(key(codec.FamilyVersions, "not a queue", 1), []byte("x")))
	require.NoError(t, b.Set(key(codec.FamilyFeed, "not a queue either", 1), []byte("x")))
	require.NoError(t, b.Apply(false))
	require.NoError(t, b.Close())

	want := []string{"a\x00b", "dead", "emptied", "live", "only dead", "only items", "only state"}
	require.Equal(t, want, names(t, db))
	require.True(t, slices.IsSorted(want))

	// Stopping early is fine.
	for name := range queue.Names(db) {
		require.Equal(t, "a\x00b", name)
		break
	}
}

func TestNamesErrors(t *testing.T) {
	for _, err := range queue.Names(nil) {
		require.ErrorIs(t, err, tipkv.ErrInvalid)
	}
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	s, err := link.Store(db)
	require.NoError(t, err)
	b := s.NewBatch()
	require.NoError(t, b.Set(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "fine"), []byte("x")))
	require.NoError(t, b.Set([]byte{byte(codec.FamilyQueueItems), 'x'}, []byte("x"))) // no terminator
	require.NoError(t, b.Apply(false))
	require.NoError(t, b.Close())
	var got []string
	var last error
	for name, err := range queue.Names(db) {
		if err != nil {
			last = err
			continue
		}
		got = append(got, name)
	}
	require.Equal(t, []string{"fine"}, got)
	require.ErrorIs(t, last, tipkv.ErrCorrupt)
	require.ErrorContains(t, last, "0278")

	require.NoError(t, db.Close())
	for _, err := range queue.Names(db) {
		require.ErrorIs(t, err, tipkv.ErrClosed)
	}
}
