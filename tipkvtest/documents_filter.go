package tipkvtest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// documentFilterCases returns the tests of the miss filter
// (versioned.Options.MissFilter).
func documentFilterCases() []testCase {
	return []testCase{
		{"MissFilterHidesNothing", checked(testMissFilterHidesNothing)},
	}
}

// versioned.Options.MissFilter never hides a document: not one written
// by another handle without the option, concurrently with the filter's
// build, before a reopen, or by another process on a shared engine (where
// the option does nothing).
func testMissFilterHidesNothing(t *testing.T, b backend) {
	db := b.Open(t, nil)
	plain := people(t, db)
	for i := range 20 {
		_, err := plain.Put(db, fmt.Sprint("before-", i), person{Age: i})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for g := range 2 {
		spawn(&wg, func() {
			for i := range b.N(40) {
				if _, err := plain.Put(db, fmt.Sprintf("racing-%d-%d", g, i), person{Age: i}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	filtered := filteredPeople(t, db)
	wg.Wait()
	ids := func() []string {
		var ids []string
		for i := range 20 {
			ids = append(ids, fmt.Sprint("before-", i))
		}
		for g := range 2 {
			for i := range b.N(40) {
				ids = append(ids, fmt.Sprintf("racing-%d-%d", g, i))
			}
		}
		return ids
	}()
	requirePresent(t, filtered, ids)
	_, err := filtered.Latest("never")
	require.ErrorIs(t, err, tipkv.ErrNotFound)

	if b.Second != nil {
		db2 := b.Second(t, db, nil)
		_, err := people(t, db2).Put(db2, "elsewhere", person{Name: "x"})
		require.NoError(t, err)
		requirePresent(t, filtered, []string{"elsewhere"})
	}
	if b.Reopen != nil {
		db = b.Reopen(t, db, nil)
		requirePresent(t, filteredPeople(t, db), ids)
	}
}

func filteredPeople(t testing.TB, db *tipkv.DB) *versioned.Collection[person] {
	t.Helper()
	c, err := versioned.NewCollection(db, "users", &versioned.Options[person]{MissFilter: true})
	require.NoError(t, err)
	return c
}

func requirePresent(t *testing.T, c *versioned.Collection[person], ids []string) {
	t.Helper()
	for _, id := range ids {
		d, err := c.Latest(id)
		require.NoError(t, err, id)
		_, err = c.Get(id, d.Version)
		require.NoError(t, err, id)
		n, err := c.Count(id)
		require.NoError(t, err, id)
		require.Equal(t, int64(1), n, id)
	}
	docs, err := c.LatestMany(ids...)
	require.NoError(t, err)
	for i, d := range docs {
		require.Equal(t, ids[i], d.ID)
	}
}
