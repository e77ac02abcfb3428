package sqlkv_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/sqlkv"
	"github.com/tipkv/tipkv/versioned"
)

// Writers of one hot stream, and of one hot document, wait their turn
// instead of failing: three processes' handles with eight goroutines each
// append to one stream and put versions of one document, with the default
// retry budget. Every write succeeds, the stream holds every event once
// and the document's versions are dense. (Before the engine's prefix locks,
// writers kept losing the race for the stream's next position or the
// document's next version and gave up after 11 attempts.)
func TestHotStreamAndDocumentWait(t *testing.T) {
	const procs, writers = 3, 8
	rounds := 150
	if testing.Short() {
		rounds = 10
	}
	cfg := sqlkv.Config{DSN: dsn(t), Table: newTable(t)}
	type handle struct {
		db   *tipkv.DB
		feed *versioned.Feed[benchDoc]
		docs *versioned.Collection[benchDoc]
	}
	hs := make([]handle, procs)
	for i := range hs {
		db, err := sqlkv.Open(context.Background(), cfg, nil)
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
			var wg sync.WaitGroup
			errs := make(chan error, procs*writers)
			for p, h := range hs {
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for r := range rounds {
							doc := benchDoc{Name: fmt.Sprintf("%d-%d", p, w), N: r}
							var err error
							if family == "stream" {
								_, err = h.feed.Append(h.db, "hot", doc)
							} else {
								_, err = h.docs.Put(h.db, "hot", doc)
							}
							if err != nil {
								errs <- fmt.Errorf("process %d writer %d round %d: %w", p, w, r, err)
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
			total := procs * writers * rounds
			if family == "stream" {
				seen := map[string]int{}
				for ev, err := range hs[0].feed.Newest("hot", tipkv.Query{}) {
					require.NoError(t, err)
					seen[fmt.Sprintf("%s/%d", ev.Value.Name, ev.Value.N)]++
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
