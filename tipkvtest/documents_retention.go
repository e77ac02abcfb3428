package tipkvtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

func keeping(t testing.TB, db *tipkv.DB, keep int) *versioned.Collection[person] {
	t.Helper()
	c, err := versioned.NewCollection[person](db, "users", &versioned.Options[person]{KeepVersions: keep})
	require.NoError(t, err)
	return c
}

// A collection with KeepVersions keeps at most that many versions of each
// document at every commit, under concurrent writers (of this process and,
// on a shared engine, another), and across restarts; the latest version
// is never dropped, so versions go on where they were.
func testKeepVersions(t *testing.T, b backend) {
	db := b.Open(t, nil)
	const keep = 3
	users := keeping(t, db, keep)
	_, err := versioned.NewCollection[person](db, "bad", &versioned.Options[person]{KeepVersions: -1})
	require.ErrorIs(t, err, tipkv.ErrInvalid)

	type writer struct {
		c *versioned.Collection[person]
		w tipkv.Writer
	}
	writers := []writer{{users, db}, {users, db}, {users, db}}
	if b.Second != nil {
		db2 := b.Second(t, db, nil)
		writers = append(writers, writer{keeping(t, db2, keep), db2})
	}
	ids := []string{"a", "b", "c"}
	n := b.N(60)
	var stop atomic.Bool
	var over atomic.Int64
	var wg, rg sync.WaitGroup
	spawn(&rg, func() {
		for !stop.Load() {
			for _, id := range ids {
				c, err := users.Count(id)
				if err != nil {
					t.Error(err)
					return
				}
				if c > keep {
					over.Store(c)
				}
			}
		}
	})
	for i, wr := range writers {
		spawn(&wg, func() {
			for j := range n {
				id := ids[(i+j)%len(ids)]
				var err error
				if j%10 == 9 {
					_, err = wr.c.Delete(wr.w, id)
				} else {
					_, err = wr.c.Put(wr.w, id, person{Name: fmt.Sprint(i, "-", j)})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	rg.Wait()
	require.Zero(t, over.Load(), "a reader saw more than %d versions", keep)
	latest := map[string]int64{}
	for _, id := range ids {
		hist := requireDense(t, users, id)
		require.Len(t, hist, keep, id)
		latest[id] = hist[0].Version
	}

	if b.Reopen == nil {
		return
	}
	db = b.Reopen(t, db, nil)
	users = keeping(t, db, keep)
	for _, id := range ids {
		v, err := users.Put(db, id, person{Name: "after"})
		require.NoError(t, err)
		require.Equal(t, latest[id]+1, v, "versions go on after a restart")
		require.Equal(t, testutil.Range(v, v-keep+1), versionsOf(requireDense(t, users, id)))
	}
	// A smaller bound applies at the next write of each document.
	db = b.Reopen(t, db, nil)
	users = keeping(t, db, 1)
	_, err = users.Delete(db, "a")
	require.NoError(t, err)
	hist := requireDense(t, users, "a")
	require.Len(t, hist, 1)
	require.True(t, hist[0].Deleted, "the marker is the one version kept")
	v, err := users.Put(db, "a", person{Name: "back"})
	require.NoError(t, err)
	require.Equal(t, hist[0].Version+1, v, "no version reused after a trimmed history")
}
