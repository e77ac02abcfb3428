package versioned_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// Count is latest-oldest+1 from two seeks, prunes counted.
func TestCount(t *testing.T) {
	db, users := openUsers(t)
	n, err := users.Count("a")
	require.NoError(t, err)
	require.Zero(t, n)
	putN(t, users, db, "a", 10)
	putN(t, users, db, "a\x00", 3)
	_, err = users.PruneBefore(db, "a", 4)
	require.NoError(t, err)

	var c seekCounter
	restore := versioned.WrapIters(c.wrap)
	n, err = users.Count("a")
	restore()
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	require.Equal(t, int64(2), c.seeks.Load())
	require.Zero(t, c.nexts.Load())

	n, err = users.Count("a\x00")
	require.NoError(t, err)
	require.Equal(t, int64(3), n, "a neighbouring id is counted apart")
	_, err = users.Count("")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// LatestMany answers in the order asked, duplicates included, with the
// zero Doc for a miss, and seeks once per distinct id.
func TestLatestMany(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "b", 3)
	putN(t, users, db, "a", 1)
	putN(t, users, db, "c", 2)

	var c seekCounter
	restore := versioned.WrapIters(c.wrap)
	docs, err := users.LatestMany("c", "missing", "a", "b", "c")
	restore()
	require.NoError(t, err)
	require.Equal(t, []int64{2, 0, 1, 3, 2}, versionsOf(docs))
	require.Equal(t, []string{"c", "", "a", "b", "c"}, idsOf(docs))
	require.Equal(t, int64(4), c.seeks.Load(), "one seek per distinct id")
	require.Equal(t, versionsOf(collect(t, users.History("c", tipkv.Query{Limit: 1, After: docs[0].Cursor()}))), []int64{1},
		"a result's cursor continues into the older versions")

	docs, err = users.LatestMany()
	require.NoError(t, err)
	require.Empty(t, docs)
	_, err = users.LatestMany("a", "")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	_, err = users.LatestMany("a", strings.Repeat("x", versioned.MaxIDSize+1))
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// HistoryPage tells whether a page has more: it reads one version more
// than the page.
func TestHistoryPage(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "a", 7)
	var got [][]int64
	q := tipkv.Query{Limit: 3}
	for {
		page, next, err := users.HistoryPage("a", q)
		require.NoError(t, err)
		got = append(got, versionsOf(page))
		if next == "" {
			break
		}
		q.After = next
	}
	require.Equal(t, [][]int64{seq(7, 5), seq(4, 2), {1}}, got)

	// A last page that is exactly full has no next.
	page, next, err := users.HistoryPage("a", tipkv.Query{Limit: 7})
	require.NoError(t, err)
	require.Len(t, page, 7)
	require.Empty(t, next)
	page, next, err = users.HistoryPage("a", tipkv.Query{})
	require.NoError(t, err)
	require.Len(t, page, 7, "no limit: everything")
	require.Empty(t, next)
	page, next, err = users.HistoryPage("nobody", tipkv.Query{Limit: 2})
	require.NoError(t, err)
	require.Empty(t, page)
	require.Empty(t, next)
	_, _, err = users.HistoryPage("a", tipkv.Query{Limit: -1})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	page, next, err = users.HistoryPage("a", tipkv.Query{Limit: int(^uint(0) >> 1)})
	require.NoError(t, err)
	require.Len(t, page, 7)
	require.Empty(t, next)
}
