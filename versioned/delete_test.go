package versioned_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/sharedstore"
	"github.com/tipkv/tipkv/internal/testutil"
)

// Delete returns the version of the marker it wrote, or of the marker
// that had already deleted the document, under races: goroutines of one
// DB, and of two handles of a shared store (where a write is checked at
// commit and runs again on a conflict), Put, Delete, and Put then Delete
// in one Update, on one document. Afterwards every marker in the history
// was returned by a Delete, every version a Delete returned is a marker,
// every version a Put returned is a value, in each Update the Delete
// returned the version after its own Put, and only a Delete before the
// first write returned 0.
func TestDeleteReturnsItsMarkerUnderRaces(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) []*tipkv.DB
	}{
		{"exclusive", func(t *testing.T) []*tipkv.DB { db := testutil.OpenMem(t); return []*tipkv.DB{db, db} }},
		{"shared", func(t *testing.T) []*tipkv.DB { return testutil.OpenShared(t, 2, sharedstore.Options{}, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbs := tc.open(t)
			var (
				mu      sync.Mutex
				markers = map[int64]bool{} // versions Deletes returned
				values  = map[int64]bool{} // versions Puts returned
				zeros   int                // Deletes that found no document
				wg      sync.WaitGroup
			)
			record := func(m map[int64]bool, v int64) {
				mu.Lock()
				defer mu.Unlock()
				m[v] = true
				if v == 0 {
					zeros++
				}
			}
			for g := range 4 {
				db := dbs[g%len(dbs)]
				users := newUsers(t, db)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 40 {
						switch (g + i) % 5 {
						case 0, 1:
							v, err := users.Delete(db, "doc")
							if err != nil {
								t.Error(err)
								return
							}
							record(markers, v)
						case 2:
							var p, v int64
							err := db.Update(func(b *tipkv.Batch) error {
								var err error
								if p, err = users.Put(b, "doc", user{Name: fmt.Sprint(g, "-", i)}); err != nil {
									return err
								}
								v, err = users.Delete(b, "doc")
								return err
							})
							if err != nil {
								t.Error(err)
								return
							}
							if v != p+1 {
								t.Errorf("Delete after Put %d in one Update returned %d", p, v)
							}
							record(values, p)
							record(markers, v)
						default:
							v, err := users.Put(db, "doc", user{Name: fmt.Sprint(g, "-", i)})
							if err != nil {
								t.Error(err)
								return
							}
							record(values, v)
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			// Only the first Deletes of goroutines 0 and 1 can come before
			// any Put; a Delete of a deleted document returns its marker.
			require.LessOrEqual(t, zeros, 2, "Deletes that returned 0")
			delete(markers, 0)
			hist := testutil.Collect(t, newUsers(t, dbs[0]).History("doc", tipkv.Query{}))
			require.Equal(t, testutil.Range(int64(len(hist)), 1), versionsOf(hist), "dense")
			written := map[int64]bool{}
			for _, d := range hist {
				if d.Deleted {
					written[d.Version] = true
					require.False(t, values[d.Version], "version %d: a marker a Put returned", d.Version)
				} else {
					require.True(t, values[d.Version], "version %d: a value no Put returned", d.Version)
				}
			}
			require.Equal(t, written, markers, "the markers written are the versions Deletes returned")
		})
	}
}
