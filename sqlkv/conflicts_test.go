package sqlkv_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/versioned"
)

// No false conflicts at tipkv's level in the default mapping: six
// processes' DB handles on one table, each Update of each writing only
// its own documents (a new one, and the next version of another), its own
// feed and its own queue (enqueue, then receive and ack), with retries
// turned off (MaxRetries -1), so that any failed condition would be an
// error. Issue 17 measured 190-202 false conflicts in 600 such
// transactions under SERIALIZABLE.
func TestNoFalseConflictsTipkv(t *testing.T) {
	cfg := sqlkv.Config{DSN: dsn(t), Table: newTable(t)}
	const workers, rounds = 6, 100
	var conflicts, updates atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		db, err := sqlkv.Open(context.Background(), cfg, &tipkv.Options{MaxRetries: -1})
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		docs, err := versioned.NewCollection[benchDoc](db, "docs", nil)
		require.NoError(t, err)
		feed, err := versioned.NewFeed[benchDoc](db, nil)
		require.NoError(t, err)
		q, err := queue.Open[benchDoc](db, fmt.Sprintf("q-%d", w), nil)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			count := func(err error) {
				updates.Add(1)
				if err != nil {
					conflicts.Add(1)
					t.Logf("worker %d: %v", w, err)
				}
			}
			for r := range rounds {
				count(db.Update(func(b *tipkv.Batch) error {
					if _, err := docs.PutIf(b, fmt.Sprintf("new-%d-%d", w, r), benchDoc{N: r}, 0); err != nil {
						return err
					}
					if _, err := docs.Put(b, fmt.Sprintf("own-%d", w), benchDoc{N: r}); err != nil {
						return err
					}
					if _, err := feed.Append(b, fmt.Sprintf("stream-%d", w), benchDoc{N: r}); err != nil {
						return err
					}
					_, err := q.Enqueue(b, benchDoc{N: r})
					return err
				}))
				ms, err := q.Receive(1, time.Minute)
				if err != nil || len(ms) != 1 {
					count(fmt.Errorf("receive: %d messages, %v", len(ms), err))
					continue
				}
				count(q.Ack(db, ms[0].ID))
			}
		}()
	}
	wg.Wait()
	t.Logf("%d conflicts in %d commits of %d processes on disjoint keys", conflicts.Load(), updates.Load(), workers)
	require.Zero(t, conflicts.Load())
}
