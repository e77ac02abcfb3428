package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/queuefmt"
	"github.com/tipkv/tipkv/internal/testutil"
)

// storedState reads queue name's state key.
func storedState(t testing.TB, db *tipkv.DB, name string) queuefmt.State {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	v, err := s.Get(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), name))
	require.NoError(t, err)
	st, err := queuefmt.ParseState(v)
	require.NoError(t, err)
	return st
}

// The stored head never moves back, even when a batch computes its state
// while an earlier consume is applied but its commit has not yet returned
// (the in-memory head still counts that message as live). Every consume
// writes the key here (StateEvery 0), as each did before runs.
func TestStoredHeadNeverMovesBack(t *testing.T) {
	defer knobs.Set(&knobs.Queue.StateEvery, 0)()
	db := testutil.OpenMem(t)
	q := openQ[int](t, db, "q", nil)
	push(t, db, q, 1, 2, 3)
	ms, err := q.Receive(3, time.Hour)
	require.NoError(t, err)

	applied, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- db.Update(func(b *tipkv.Batch) error {
			// Hold the commit between apply and the Ack's own commit
			// hook, which runs after this one.
			err := link.Write(b, func(tx *link.Tx) error {
				tx.OnApplied(func() { close(applied) })
				tx.OnCommit(func() { <-release })
				return nil
			})
			if err != nil {
				return err
			}
			return q.Ack(b, ms[0].ID)
		})
	}()
	<-applied
	require.Equal(t, int64(2), storedState(t, db, "q").Head)
	require.NoError(t, q.Ack(db, ms[1].ID))
	require.GreaterOrEqual(t, storedState(t, db, "q").Head, int64(2), "the stored head moved back")
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, q.Ack(db, ms[2].ID))
	require.Equal(t, queuefmt.State{Head: 4, Tail: 4, Counted: true, Count: 0, CountTo: 4, Run: true}, storedState(t, db, "q"))
}
