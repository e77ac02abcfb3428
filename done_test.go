package tipkv_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// Done is open until Close, closed from the moment Close begins (a queue
// Wait that Close wakes finds it closed already), the same channel on
// every call, and a second Close neither reopens nor closes it twice.
func TestDoneClosesWithClose(t *testing.T) {
	for _, mem := range []bool{true, false} {
		db, err := tipkv.Open(t.TempDir(), &tipkv.Options{InMemory: mem})
		require.NoError(t, err)
		done := db.Done()
		require.Equal(t, done, db.Done(), "every call returns the same channel")
		select {
		case <-done:
			t.Fatal("Done is closed before Close")
		default:
		}

		q, err := queue.Open[int](db, "never-filled", nil)
		require.NoError(t, err)
		waiting := make(chan struct{})
		woke := make(chan bool)
		go func() {
			close(waiting)
			err := q.Wait(context.Background())
			if !errors.Is(err, tipkv.ErrClosed) {
				t.Errorf("Wait after Close: %v, want ErrClosed", err)
			}
			select {
			case <-done:
				woke <- true
			default:
				woke <- false
			}
		}()
		<-waiting
		require.NoError(t, db.Close())
		require.True(t, <-woke, "Done must be closed before Close wakes a Wait")
		<-done // closed: does not block
		require.ErrorIs(t, db.Close(), tipkv.ErrClosed)
		<-db.Done()
	}
}
