package tipkvtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// documentReadCases returns the tests of reading documents: History and
// its pages and cursors, bad queries, LatestAll, Count, LatestMany,
// HistoryPage, the names of collections and streams, and reads through a
// snapshot.
func documentReadCases() []testCase {
	return []testCase{
		{"HistoryPages", checked(testHistoryPages)},
		{"HistoryStopsWhenTheConsumerDoes", checked(testHistoryStopsWhenTheConsumerDoes)},
		{"BadQueriesAndCursors", checked(testBadQueriesAndCursors)},
		{"LatestAll", checked(testLatestAll)},
		{"Count", checked(testCount)},
		{"LatestMany", checked(testLatestMany)},
		{"HistoryPage", checked(testHistoryPage)},
		{"CollectionsAndStreams", checked(testCollectionsAndStreams)},
		{"SnapshotReadsAgree", checked(testSnapshotReadsAgree)},
	}
}

// History pages newest first within [From, To] by Limit, each page's last
// cursor continuing into the next: versions written between pages do not
// shift it, a Latest, Get or AsOf result's cursor continues into the older
// versions, and the oldest version's cursor ends the read.
func testHistoryPages(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 25)
	putN(t, users, db, "b", 3)

	require.Equal(t, [][]int64{testutil.Range(25, 16), testutil.Range(15, 6), testutil.Range(5, 1)},
		pages(t, users, "a", tipkv.Query{Limit: 10}))
	require.Equal(t, [][]int64{testutil.Range(20, 14), testutil.Range(13, 7), testutil.Range(6, 5)},
		pages(t, users, "a", tipkv.Query{Limit: 7, From: 5, To: 20}))
	require.Equal(t, [][]int64{testutil.Range(25, 1)}, pages(t, users, "a", tipkv.Query{}))
	require.Equal(t, [][]int64{{7}}, pages(t, users, "a", tipkv.Query{From: 7, To: 7}))
	require.Equal(t, [][]int64{testutil.Range(25, 24)}, pages(t, users, "a", tipkv.Query{From: 24, To: 1000}))
	require.Empty(t, pages(t, users, "a", tipkv.Query{From: 26}))
	require.Empty(t, pages(t, users, "nobody", tipkv.Query{Limit: 3}))

	// Versions written between pages do not shift the next page.
	first := testutil.Collect(t, users.History("a", tipkv.Query{Limit: 5}))
	putN(t, users, db, "a", 3)
	next := testutil.Collect(t, users.History("a", tipkv.Query{Limit: 5, After: first[len(first)-1].Cursor()}))
	require.Equal(t, testutil.Range(20, 16), versionsOf(next))

	// A Latest, Get or AsOf result continues into the older versions.
	d, err := users.AsOf("a", 10)
	require.NoError(t, err)
	require.Equal(t, testutil.Range(9, 7), versionsOf(testutil.Collect(t, users.History("a", tipkv.Query{Limit: 3, After: d.Cursor()}))))

	// The last version's cursor ends the read.
	last := testutil.Collect(t, users.History("a", tipkv.Query{From: 1, To: 1}))
	require.Empty(t, testutil.Collect(t, users.History("a", tipkv.Query{After: last[0].Cursor()})))
}

// History stops when its consumer breaks out of the loop, having yielded
// only what was consumed.
func testHistoryStopsWhenTheConsumerDoes(t *testing.T, b backend) {
	db, users := openPeople(t, b)
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

// Bad queries (a negative limit or bound, From after To, a Prefix on
// History, bounds on LatestAll) and cursors that are garbage, truncated,
// altered, too long or from another read (another document, collection,
// LatestAll or a feed) are ErrInvalid, naming the document. A zero Doc
// has no cursor.
func testBadQueriesAndCursors(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 5)
	putN(t, users, db, "b", 5)
	other, err := versioned.NewCollection[person](db, "other", nil)
	require.NoError(t, err)
	putN(t, other, db, "a", 5)
	feed, err := versioned.NewFeed[person](db, nil)
	require.NoError(t, err)
	_, err = feed.Append(db, "a", person{})
	require.NoError(t, err)

	hist := testutil.Collect(t, users.History("a", tipkv.Query{Limit: 2}))
	all := testutil.Collect(t, users.LatestAll(tipkv.Query{Limit: 1}))
	events := testutil.Collect(t, feed.Newest("a", tipkv.Query{}))
	otherHist := testutil.Collect(t, other.History("a", tipkv.Query{Limit: 1}))
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
		"other document's cursor":   {After: testutil.Collect(t, users.History("b", tipkv.Query{Limit: 1}))[0].Cursor()},
		"other collection's cursor": {After: otherHist[0].Cursor()},
		"LatestAll cursor":          {After: all[0].Cursor()},
		"feed cursor":               {After: events[0].Cursor()},
	} {
		err := testutil.ReadErr(t, users.History("a", q))
		require.ErrorIs(t, err, tipkv.ErrInvalid, name)
		require.ErrorContains(t, err, `"a"`, name)
	}
	for name, q := range map[string]tipkv.Query{
		"from":            {From: 1},
		"to":              {To: 3},
		"negative limit":  {Limit: -1},
		"history cursor":  {After: hist[0].Cursor()},
		"garbage cursor":  {After: "%%%"},
		"other coll's":    {After: testutil.Collect(t, other.LatestAll(tipkv.Query{}))[0].Cursor()},
		"a feed's cursor": {After: events[0].Cursor()},
	} {
		require.ErrorIs(t, testutil.ReadErr(t, users.LatestAll(q)), tipkv.ErrInvalid, name)
	}
	require.Empty(t, versioned.Doc[person]{}.Cursor())
}

// LatestAll yields the latest version of every document in id order, one
// per document, within a Prefix and by pages; a cursor before the
// prefix's range starts the read at it, one after ends it. A pruned
// document keeps its latest, a deleted one is skipped, and another
// collection's documents never mix in.
func testLatestAll(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("u%02d", i)
		ids = append(ids, id)
		putN(t, users, db, id, 1+i%7)
	}
	putN(t, users, db, "v", 2)
	other, err := versioned.NewCollection[person](db, "userz", nil)
	require.NoError(t, err)
	putN(t, other, db, "u00", 9)

	docs := testutil.Collect(t, users.LatestAll(tipkv.Query{}))
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
		page := testutil.Collect(t, users.LatestAll(q))
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 4)
		got = append(got, idsOf(page)...)
		q.After = page[len(page)-1].Cursor()
	}
	require.Equal(t, ids[10:20], got)
	require.Empty(t, testutil.Collect(t, users.LatestAll(tipkv.Query{Prefix: "w"})))

	// A cursor from outside the prefix's range.
	require.Empty(t, testutil.Collect(t, users.LatestAll(tipkv.Query{Prefix: "u", After: docs[30].Cursor()})))
	rest := testutil.Collect(t, users.LatestAll(tipkv.Query{Prefix: "v", After: docs[0].Cursor()}))
	require.Len(t, rest, 1)

	// Pruned and deleted documents.
	_, err = users.Prune(db, "u06", 1)
	require.NoError(t, err)
	_, err = users.Delete(db, "u07")
	require.NoError(t, err)
	docs = testutil.Collect(t, users.LatestAll(tipkv.Query{Prefix: "u0"}))
	require.Len(t, docs, 9)
	require.Equal(t, "u06", docs[6].ID)
	require.Equal(t, int64(7), docs[6].Version)
	require.Equal(t, "u08", docs[7].ID)
}

// Count is latest-oldest+1, prunes and markers counted.
func testCount(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	n, err := users.Count("a")
	require.NoError(t, err)
	require.Zero(t, n)
	putN(t, users, db, "a", 10)
	putN(t, users, db, "a\x00", 3)
	_, err = users.PruneBefore(db, "a", 4)
	require.NoError(t, err)
	n, err = users.Count("a")
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	_, err = users.Delete(db, "a")
	require.NoError(t, err)
	n, err = users.Count("a")
	require.NoError(t, err)
	require.Equal(t, int64(8), n, "a delete marker is a version kept")

	n, err = users.Count("a\x00")
	require.NoError(t, err)
	require.Equal(t, int64(3), n, "a neighbouring id is counted apart")
	_, err = users.Count("")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// LatestMany answers in the order asked, duplicates included, with the
// zero Doc for a miss or a deleted document.
func testLatestMany(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "b", 3)
	putN(t, users, db, "a", 1)
	putN(t, users, db, "c", 2)
	putN(t, users, db, "gone", 2)
	v, err := users.Delete(db, "gone")
	require.NoError(t, err)
	require.Equal(t, int64(3), v)

	docs, err := users.LatestMany("c", "missing", "a", "gone", "b", "c")
	require.NoError(t, err)
	require.Equal(t, []int64{2, 0, 1, 0, 3, 2}, versionsOf(docs))
	require.Equal(t, []string{"c", "", "a", "", "b", "c"}, idsOf(docs))
	require.Equal(t, []int64{1}, versionsOf(testutil.Collect(t, users.History("c", tipkv.Query{Limit: 1, After: docs[0].Cursor()}))),
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
func testHistoryPage(t *testing.T, b backend) {
	db, users := openPeople(t, b)
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
	require.Equal(t, [][]int64{testutil.Range(7, 5), testutil.Range(4, 2), {1}}, got)

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

// Collections and Streams name every collection and stream that holds
// keys, in bytewise order; names are bytes like ids.
func testCollectionsAndStreams(t *testing.T, b backend) {
	db := b.Open(t, nil)
	require.Empty(t, testutil.Collect(t, versioned.Collections(db)))
	require.Empty(t, testutil.Collect(t, versioned.Streams(db)))

	names := []string{"users", "user", "users\x00", "\xff", "a\x00b", "orders"}
	for i, name := range names {
		c, err := versioned.NewCollection[int](db, name, nil)
		require.NoError(t, err)
		for d := range 1 + i*3 {
			_, err := c.Put(db, fmt.Sprint("doc", d), d)
			require.NoError(t, err)
		}
	}
	feed, err := versioned.NewFeed[int](db, nil)
	require.NoError(t, err)
	for _, s := range []string{"clicks", "audit", "audit\x00x"} {
		for i := range 5 {
			_, err := feed.Append(db, s, i)
			require.NoError(t, err)
		}
	}
	// A collection emptied by Purge is gone; one whose documents are
	// deleted is not (its markers are versions).
	empty, err := versioned.NewCollection[int](db, "purged", nil)
	require.NoError(t, err)
	_, err = empty.Put(db, "x", 1)
	require.NoError(t, err)
	_, err = empty.Purge(db, "x")
	require.NoError(t, err)
	deleted, err := versioned.NewCollection[int](db, "deleted", nil)
	require.NoError(t, err)
	_, err = deleted.Put(db, "x", 1)
	require.NoError(t, err)
	_, err = deleted.Delete(db, "x")
	require.NoError(t, err)

	want := append([]string{"deleted"}, names...)
	slices.Sort(want)
	require.Equal(t, want, testutil.Collect(t, versioned.Collections(db)))
	require.Equal(t, []string{"audit", "audit\x00x", "clicks"}, testutil.Collect(t, versioned.Streams(db)))

	// A consumer that stops early.
	for name, err := range versioned.Collections(db) {
		require.NoError(t, err)
		require.Equal(t, want[0], name)
		break
	}
	require.ErrorIs(t, testutil.ReadErr(t, versioned.Collections(nil)), tipkv.ErrInvalid)
}

// Reads through one snapshot agree with each other while writes commit:
// each sees the store as of the snapshot, and a view of a finished
// snapshot, of another DB or of none is refused.
func testSnapshotReadsAgree(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	putN(t, users, db, "a", 5)
	putN(t, users, db, "b", 2)
	feed, err := versioned.NewFeed[person](db, nil)
	require.NoError(t, err)
	for range 3 {
		_, err := feed.Append(db, "s", person{})
		require.NoError(t, err)
	}

	var kept *tipkv.Snapshot
	require.NoError(t, db.View(func(s *tipkv.Snapshot) error {
		kept = s
		view, fv := users.In(s), feed.In(s)
		check := func(when string) {
			d, err := view.Latest("a")
			require.NoError(t, err, when)
			require.Equal(t, int64(5), d.Version, when)
			d, err = view.Get("a", 5)
			require.NoError(t, err, when)
			require.Equal(t, 4, d.Value.Age, when)
			d, err = view.AsOf("a", 100)
			require.NoError(t, err, when)
			require.Equal(t, int64(5), d.Version, when)
			_, err = view.Get("a", 6)
			require.ErrorIs(t, err, tipkv.ErrNotFound, when)
			require.Equal(t, testutil.Range(5, 1), versionsOf(testutil.Collect(t, view.History("a", tipkv.Query{}))), when)
			page, next, err := view.HistoryPage("a", tipkv.Query{Limit: 2})
			require.NoError(t, err, when)
			require.Equal(t, testutil.Range(5, 4), versionsOf(page), when)
			require.NotEmpty(t, next, when)
			require.Equal(t, []string{"a", "b"}, idsOf(testutil.Collect(t, view.LatestAll(tipkv.Query{}))), when)
			n, err := view.Count("a")
			require.NoError(t, err, when)
			require.Equal(t, int64(5), n, when)
			many, err := view.LatestMany("b", "c", "a")
			require.NoError(t, err, when)
			require.Equal(t, []int64{2, 0, 5}, versionsOf(many), when)
			require.Len(t, testutil.Collect(t, fv.Newest("s", tipkv.Query{})), 3, when)
			require.Len(t, testutil.Collect(t, fv.Between("s", time.Time{}, versioned.MaxTime, tipkv.Query{})), 3, when)
		}
		check("before the writes")
		putN(t, users, db, "a", 2)
		_, err := users.Put(db, "c", person{})
		require.NoError(t, err)
		_, err = users.Delete(db, "b")
		require.NoError(t, err)
		_, err = users.Prune(db, "a", 2)
		require.NoError(t, err)
		_, err = feed.Append(db, "s", person{})
		require.NoError(t, err)
		require.NoError(t, feed.Trim(db, "s", 1))
		check("after the writes")

		d, err := users.Latest("a")
		require.NoError(t, err)
		require.Equal(t, int64(7), d.Version, "the DB itself sees the writes")

		other := b.Open(t, nil)
		otherUsers := people(t, other)
		_, err = otherUsers.In(s).Latest("a")
		require.ErrorIs(t, err, tipkv.ErrInvalid, "a snapshot of another DB")
		return nil
	}))
	_, err = users.In(kept).Latest("a")
	require.ErrorIs(t, err, tipkv.ErrInvalid, "a snapshot whose View returned")
	require.ErrorIs(t, testutil.ReadErr(t, users.In(kept).History("a", tipkv.Query{})), tipkv.ErrInvalid)
	require.ErrorIs(t, testutil.ReadErr(t, feed.In(kept).Newest("s", tipkv.Query{})), tipkv.ErrInvalid)
	_, err = users.In(nil).Count("a")
	require.ErrorIs(t, err, tipkv.ErrInvalid)
}

// pages reads History page by page, passing each page's last cursor on.
func pages(t *testing.T, users *versioned.Collection[person], id string, q tipkv.Query) [][]int64 {
	t.Helper()
	var out [][]int64
	for range 100 {
		page := testutil.Collect(t, users.History(id, q))
		if len(page) == 0 {
			return out
		}
		out = append(out, versionsOf(page))
		q.After = page[len(page)-1].Cursor()
	}
	t.Fatal("no end of pages")
	return nil
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
