package etcdkv_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/etcdkv"
	"github.com/tipkv/tipkv/versioned"
)

// Writers of one hot stream, and of one hot document, wait their turn
// instead of failing: three handles (three stores, as three processes
// would have) with eight goroutines each append to one stream and put
// versions of one document, with the default retry budget. Every write
// succeeds, the stream holds every event once and the document's versions
// are dense. (Before the store's prefix locks, writers kept losing the
// race for the stream's next position or the document's next version and
// gave up after 11 attempts: issue 28; with the store's locks but batches
// that did not check them, engine.LockHolding, a writer of the document
// still gave up after 11 attempts at 40 rounds.)
func TestHotStreamAndDocumentWait(t *testing.T) {
	const handles, writers = 3, 8
	rounds := 20
	if testing.Short() {
		rounds = 8
	}
	cfg := etcdkv.Config{Endpoints: etcdkv.ClusterForTest().Endpoints(), Namespace: etcdkv.NamespaceForTest(t)}
	type handle struct {
		db   *tipkv.DB
		feed *versioned.Feed[benchDoc]
		docs *versioned.Collection[benchDoc]
	}
	hs := make([]handle, handles)
	for i := range hs {
		db, err := etcdkv.Open(context.Background(), cfg, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		hs[i].db = db
		hs[i].feed, err = versioned.NewFeed[benchDoc](db, nil)
		require.NoError(t, err)
		hs[i].docs, err = versioned.NewCollection[benchDoc](db, "docs", nil)
		require.NoError(t, err)
	}
	for _, family := range []string{"stream", "document"} {
		t.Run(family, func(t *testing.T) {
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, handles*writers)
			for p, h := range hs {
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for r := range rounds {
							doc := benchDoc{Name: fmt.Sprintf("%d-%d", p, w), Count: r}
							var err error
							if family == "stream" {
								_, err = h.feed.Append(h.db, "hot", doc)
							} else {
								_, err = h.docs.Put(h.db, "hot", doc)
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
			total := handles * writers * rounds
			t.Logf("%d writes of one %s by %d handles x %d goroutines in %v", total, family, handles, writers, time.Since(start).Round(time.Millisecond))
			for err := range errs {
				require.NoError(t, err)
			}
			if family == "stream" {
				seen := map[string]int{}
				for ev, err := range hs[0].feed.Newest("hot", tipkv.Query{}) {
					require.NoError(t, err)
					seen[fmt.Sprintf("%s/%d", ev.Value.Name, ev.Value.Count)]++
				}
				require.Len(t, seen, total, "events in the stream")
				for k, n := range seen {
					require.Equal(t, 1, n, "event %s", k)
				}
				return
			}
			v, err := hs[0].docs.Latest("hot")
			require.NoError(t, err)
			require.EqualValues(t, total, v.Version, "the document's last version")
		})
	}
}
