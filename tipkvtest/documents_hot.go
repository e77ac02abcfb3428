package tipkvtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/versioned"
)

// canLock reports whether db's engine takes prefix locks (engine.Locker
// and engine.LockHolding, and the dialect can lock).
func canLock(t *testing.T, db *tipkv.DB) bool {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	lk, ok := s.(engine.Locker)
	if !ok {
		return false
	}
	b := s.NewBatch()
	_, holds := b.(engine.LockHolding)
	_ = b.Close()
	if !holds {
		return false
	}
	unlock, _, err := lk.Lock(context.Background(), [][]byte{[]byte("\x0dprobe")})
	if errors.Is(err, errors.ErrUnsupported) {
		return false
	}
	require.NoError(t, err)
	unlock()
	return true
}

// Writers of one hot stream, and of one hot document, take turns instead
// of failing: three handles (three processes) with eight goroutines each
// append to one stream and put versions of one document, at the default
// retry budget. Every write succeeds, the stream holds every event once
// and the document's versions are dense. Only an engine with prefix locks
// promises this (without them, writers that keep losing the race between
// their read and their commit give up with ErrConflict): it skips on
// others. Before writers gave way to a lock's holder (engine.LockHolding)
// this failed under load on a default-settings PostgreSQL and on etcd:
// "gave up after 11 attempts" (issue 28).
func testHotWritersTakeTurns(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	const handles, writers = 3, 8
	rounds := b.N(100)
	type handle struct {
		db   *tipkv.DB
		feed *versioned.Feed[string]
		docs *versioned.Collection[string]
	}
	first := b.Open(t, nil)
	if !canLock(t, first) {
		t.Skip("the engine has no prefix locks: writers of a hot key may give up")
	}
	hs := make([]handle, handles)
	for i := range hs {
		db := first
		if i > 0 {
			db = b.Second(t, first, nil)
		}
		feed, err := versioned.NewFeed[string](db, nil)
		require.NoError(t, err)
		docs, err := versioned.NewCollection[string](db, "docs", nil)
		require.NoError(t, err)
		hs[i] = handle{db, feed, docs}
	}
	for _, family := range []string{"stream", "document"} {
		t.Run(family, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, handles*writers)
			for p, h := range hs {
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for r := range rounds {
							v := fmt.Sprintf("%d-%d-%d", p, w, r)
							var err error
							if family == "stream" {
								_, err = h.feed.Append(h.db, "hot", v)
							} else {
								_, err = h.docs.Put(h.db, "hot", v)
							}
							if err != nil {
								errs <- fmt.Errorf("handle %d writer %d round %d: %w", p, w, r, err)
								return
							}
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			total := handles * writers * rounds
			if family == "stream" {
				seen := map[string]int{}
				for ev, err := range hs[0].feed.Newest("hot", tipkv.Query{}) {
					require.NoError(t, err)
					seen[ev.Value]++
				}
				require.Len(t, seen, total, "events in the stream")
				for k, n := range seen {
					require.Equal(t, 1, n, "event %s", k)
				}
				return
			}
			d, err := hs[0].docs.Latest("hot")
			require.NoError(t, err)
			require.EqualValues(t, total, d.Version, "the document's last version: every Put landed once")
		})
	}
}
