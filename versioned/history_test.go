package versioned_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

// pages reads History page by page, passing each page's last cursor on.
func pages(t *testing.T, users *versioned.Collection[user], id string, q tipkv.Query) [][]int64 {
	t.Helper()
	var out [][]int64
	for range 100 {
		page := collect(t, users.History(id, q))
		if len(page) == 0 {
			return out
		}
		out = append(out, versionsOf(page))
		q.After = page[len(page)-1].Cursor()
	}
	t.Fatal("no end of pages")
	return nil
}

func TestHistoryPages(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "a", 25)
	putN(t, users, db, "b", 3)

	require.Equal(t, [][]int64{seq(25, 16), seq(15, 6), seq(5, 1)},
		pages(t, users, "a", tipkv.Query{Limit: 10}))
	require.Equal(t, [][]int64{seq(20, 14), seq(13, 7), seq(6, 5)},
		pages(t, users, "a", tipkv.Query{Limit: 7, From: 5, To: 20}))
	require.Equal(t, [][]int64{seq(25, 1)}, pages(t, users, "a", tipkv.Query{}))
	require.Equal(t, [][]int64{{7}}, pages(t, users, "a", tipkv.Query{From: 7, To: 7}))
	require.Equal(t, [][]int64{seq(25, 24)}, pages(t, users, "a", tipkv.Query{From: 24, To: 1000}))
	require.Empty(t, pages(t, users, "a", tipkv.Query{From: 26}))
	require.Empty(t, pages(t, users, "nobody", tipkv.Query{Limit: 3}))

	// Versions written between pages do not shift the next page.
	first := collect(t, users.History("a", tipkv.Query{Limit: 5}))
	putN(t, users, db, "a", 3)
	next := collect(t, users.History("a", tipkv.Query{Limit: 5, After: first[len(first)-1].Cursor()}))
	require.Equal(t, seq(20, 16), versionsOf(next))

	// A Latest, Get or AsOf result continues into the older versions.
	d, err := users.AsOf("a", 10)
	require.NoError(t, err)
	require.Equal(t, seq(9, 7), versionsOf(collect(t, users.History("a", tipkv.Query{Limit: 3, After: d.Cursor()}))))

	// The last version's cursor ends the read.
	last := collect(t, users.History("a", tipkv.Query{From: 1, To: 1}))
	require.Empty(t, collect(t, users.History("a", tipkv.Query{After: last[0].Cursor()})))
}

func TestHistoryStopsWhenTheConsumerDoes(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "a", 10)
	n := 0
	for d, err := range users.History("a", tipkv.Query{}) {
		require.NoError(t, err)
		require.Equal(t, int64(10-n), d.Version)
		if n++; n == 3 {
			break
		}
	}
	require.Equal(t, 3, n)
}

func TestBadQueriesAndCursors(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "a", 5)
	putN(t, users, db, "b", 5)
	other, err := versioned.NewCollection[user](db, "other", nil)
	require.NoError(t, err)
	putN(t, other, db, "a", 5)
	feed, err := versioned.NewFeed[user](db, nil)
	require.NoError(t, err)
	_, err = feed.Append(db, "a", user{})
	require.NoError(t, err)

	hist := collect(t, users.History("a", tipkv.Query{Limit: 2}))
	all := collect(t, users.LatestAll(tipkv.Query{Limit: 1}))
	events := collect(t, feed.Newest("a", tipkv.Query{}))
	otherHist := collect(t, other.History("a", tipkv.Query{Limit: 1}))
	c := string(hist[1].Cursor())

	for name, q := range map[string]tipkv.Query{
		"negative limit":            {Limit: -1},
		"from after to":             {From: 5, To: 4},
		"negative from":             {From: -1},
		"negative to":               {To: -2},
		"prefix":                    {Prefix: "a"},
		"garbage cursor":            {After: "!!!"},
		"empty base64 cursor":       {After: "AA"},
		"truncated cursor":          {After: tipkv.Cursor(c[:len(c)-1])},
		"flipped cursor":            {After: tipkv.Cursor(flip(c))},
		"long cursor":               {After: tipkv.Cursor(make([]byte, 5000))},
		"other document's cursor":   {After: collect(t, users.History("b", tipkv.Query{Limit: 1}))[0].Cursor()},
		"other collection's cursor": {After: otherHist[0].Cursor()},
		"LatestAll cursor":          {After: all[0].Cursor()},
		"feed cursor":               {After: events[0].Cursor()},
	} {
		err := readErr(users.History("a", q))
		require.ErrorIs(t, err, tipkv.ErrInvalid, name)
		require.ErrorContains(t, err, `"a"`, name)
	}
	for name, q := range map[string]tipkv.Query{
		"from":            {From: 1},
		"to":              {To: 3},
		"negative limit":  {Limit: -1},
		"history cursor":  {After: hist[0].Cursor()},
		"garbage cursor":  {After: "%%%"},
		"other coll's":    {After: collect(t, other.LatestAll(tipkv.Query{}))[0].Cursor()},
		"a feed's cursor": {After: events[0].Cursor()},
	} {
		require.ErrorIs(t, readErr(users.LatestAll(q)), tipkv.ErrInvalid, name)
	}
	require.Empty(t, versioned.Doc[user]{}.Cursor())
}

// flip changes one character of a cursor in the middle.
func flip(c string) string {
	b := []byte(c)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestLatestAll(t *testing.T) {
	db, users := openUsers(t)
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("u%02d", i)
		ids = append(ids, id)
		putN(t, users, db, id, 1+i%7)
	}
	putN(t, users, db, "v", 2)
	other, err := versioned.NewCollection[user](db, "userz", nil)
	require.NoError(t, err)
	putN(t, other, db, "u00", 9)

	docs := collect(t, users.LatestAll(tipkv.Query{}))
	require.Len(t, docs, 31)
	for i, id := range ids {
		require.Equal(t, id, docs[i].ID)
		require.Equal(t, int64(1+i%7), docs[i].Version)
		require.Equal(t, i%7, docs[i].Value.Age)
	}
	require.Equal(t, "v", docs[30].ID)

	// Prefix and pages.
	q := tipkv.Query{Prefix: "u1", Limit: 4}
	var got []string
	for range 10 {
		page := collect(t, users.LatestAll(q))
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 4)
		for _, d := range page {
			got = append(got, d.ID)
		}
		q.After = page[len(page)-1].Cursor()
	}
	require.Equal(t, ids[10:20], got)
	require.Empty(t, collect(t, users.LatestAll(tipkv.Query{Prefix: "w"})))

	// A cursor from outside the prefix's range.
	require.Empty(t, collect(t, users.LatestAll(tipkv.Query{Prefix: "u", After: docs[30].Cursor()})))
	rest := collect(t, users.LatestAll(tipkv.Query{Prefix: "v", After: docs[0].Cursor()}))
	require.Len(t, rest, 1)

	// Pruned and deleted documents.
	_, err = users.Prune(db, "u06", 1)
	require.NoError(t, err)
	require.NoError(t, users.Delete(db, "u07"))
	docs = collect(t, users.LatestAll(tipkv.Query{Prefix: "u0"}))
	require.Len(t, docs, 9)
	require.Equal(t, "u06", docs[6].ID)
	require.Equal(t, int64(7), docs[6].Version)
	require.Equal(t, "u08", docs[7].ID)
}

// LatestAll is a skip-scan: one positioning call per document, whatever
// the number of versions, and no Next over older versions.
func TestLatestAllSeeksOncePerDocument(t *testing.T) {
	for _, versions := range []int{1, 50} {
		t.Run(fmt.Sprintf("versions=%d", versions), func(t *testing.T) {
			db, users := openUsers(t)
			for i := range 40 {
				putN(t, users, db, fmt.Sprintf("d%02d", i), versions)
			}
			require.NoError(t, db.Flush())
			var c seekCounter
			defer versioned.WrapIters(c.wrap)()
			docs := collect(t, users.LatestAll(tipkv.Query{}))
			require.Len(t, docs, 40)
			require.Equal(t, int64(41), c.seeks.Load(), "First, then one NextPrefix per document")
			require.Zero(t, c.nexts.Load())
		})
	}
}

// Latest, AsOf and History are one seek each; History then steps forward.
func TestPointReadsSeekOnce(t *testing.T) {
	db, users := openUsers(t)
	putN(t, users, db, "a", 20)
	var c seekCounter
	defer versioned.WrapIters(c.wrap)()

	_, err := users.Latest("a")
	require.NoError(t, err)
	_, err = users.AsOf("a", 7)
	require.NoError(t, err)
	_, err = users.Latest("missing")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.Equal(t, int64(3), c.seeks.Load())
	require.Zero(t, c.nexts.Load())

	require.Len(t, collect(t, users.History("a", tipkv.Query{Limit: 5})), 5)
	require.Equal(t, int64(4), c.seeks.Load())
	require.Equal(t, int64(4), c.nexts.Load(), "a page of 5 is one seek and 4 steps")
}

// The Latest of a document that never existed is answered by the bloom
// filters once the data is in tables.
func TestMissingLatestHitsBloomFilter(t *testing.T) {
	db, users := openUsers(t)
	for i := range 1000 {
		_, err := users.Put(db, fmt.Sprintf("doc-%04d", i), user{Age: i})
		require.NoError(t, err)
	}
	require.NoError(t, db.Flush())

	hits0, misses0 := filterStats(t, db)
	for i := range 200 {
		_, err := users.Latest(fmt.Sprintf("absent-%04d", i))
		require.ErrorIs(t, err, tipkv.ErrNotFound)
	}
	hits1, misses1 := filterStats(t, db)
	t.Logf("200 missing documents: %d filter hits, %d misses", hits1-hits0, misses1-misses0)
	require.GreaterOrEqual(t, hits1-hits0, int64(190), "at most a few false positives (10 bits per key)")

	for i := range 200 {
		_, err := users.Latest(fmt.Sprintf("doc-%04d", i))
		require.NoError(t, err)
	}
	hits2, misses2 := filterStats(t, db)
	t.Logf("200 present documents: %d filter hits, %d misses", hits2-hits1, misses2-misses1)
	require.GreaterOrEqual(t, misses2-misses1, int64(200), "a present document passes the filter")
}
