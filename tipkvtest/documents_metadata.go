package tipkvtest

import (
	"context"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// documentMetadataCases returns the tests of metadata on document
// versions: set per write or per Update, returned by every read, bounded.
func documentMetadataCases() []testCase {
	return []testCase{
		{"MetadataRoundTrip", checked(testMetadataRoundTrip)},
		{"MetadataBounds", checked(testMetadataBounds)},
		{"MetadataRetriedUpdate", checked(testMetadataRetriedUpdate)},
		{"EventMetadataRoundTrip", checked(testEventMetadataRoundTrip)},
	}
}

// requireMeta requires that d carries want (nil: none).
func requireMeta[T any](t testing.TB, d versioned.Doc[T], want *tipkv.Metadata, what string) {
	t.Helper()
	got, err := d.Metadata()
	require.NoError(t, err, what)
	if want == nil {
		require.False(t, d.HasMetadata(), what)
		require.Equal(t, tipkv.Metadata{}, got, what)
		return
	}
	require.True(t, d.HasMetadata(), what)
	require.Equal(t, *want, got, what)
}

// Metadata set on a write (WithMetadata, on the DB or a Batch) or on an
// Update (Batch.SetMetadata) is stored with each version the write makes,
// delete markers included, a write's own winning over the Update's; every
// read returns it, and a version written without has none.
func testMetadataRoundTrip(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	ada := tipkv.Metadata{Author: "ada", Reason: "fix a typo", CorrelationID: "req-1", CausationID: "evt-9",
		Headers: map[string]string{"tenant": "t1", "ip": "10.0.0.1"}}
	job := tipkv.Metadata{Author: "import-job", Reason: "nightly import"}
	_, err := users.Put(db, "a", person{Name: "plain"}) // v1: none
	require.NoError(t, err)
	_, err = users.Put(tipkv.WithMetadata(db, ada), "a", person{Name: "by ada"}) // v2
	require.NoError(t, err)
	_, err = users.PutIf(tipkv.WithMetadata(db, job), "a", person{Name: "by the job"}, 2) // v3
	require.NoError(t, err)
	v, err := users.Delete(tipkv.WithMetadata(db, ada), "a")
	require.NoError(t, err)
	require.Equal(t, int64(4), v, "a marker with metadata")
	require.NoError(t, db.Update(func(tx *tipkv.Batch) error {
		if err := tx.SetMetadata(job); err != nil {
			return err
		}
		if _, err := users.Put(tx, "a", person{Name: "in an Update"}); err != nil { // v5: the Update's
			return err
		}
		if _, err := users.Put(tx, "b", person{Name: "in an Update"}); err != nil { // b v1: the Update's
			return err
		}
		_, err := users.Put(tipkv.WithMetadata(tx, ada), "c", person{Name: "its own"}) // c v1: its own
		return err
	}))
	want := map[int64]*tipkv.Metadata{1: nil, 2: &ada, 3: &job, 4: &ada, 5: &job}
	for _, d := range testutil.Collect(t, users.History("a", tipkv.Query{})) {
		requireMeta(t, d, want[d.Version], "History")
	}
	page, _, err := users.HistoryPage("a", tipkv.Query{Limit: 5})
	require.NoError(t, err)
	for _, d := range page {
		requireMeta(t, d, want[d.Version], "HistoryPage")
	}
	for _, d := range testutil.Collect(t, users.HistoryBetween("a", t0.Add(-1), t0.AddDate(100, 0, 0), tipkv.Query{})) {
		requireMeta(t, d, want[d.Version], "HistoryBetween")
	}
	d, err := users.Latest("a")
	require.NoError(t, err)
	requireMeta(t, d, &job, "Latest")
	d, err = users.Get("a", 2)
	require.NoError(t, err)
	requireMeta(t, d, &ada, "Get")
	d, err = users.AsOf("a", 3)
	require.NoError(t, err)
	requireMeta(t, d, &job, "AsOf")
	d, err = users.AsOfTime("a", d.Time)
	require.NoError(t, err)
	requireMeta(t, d, &job, "AsOfTime")
	many, err := users.LatestMany("b", "c")
	require.NoError(t, err)
	requireMeta(t, many[0], &job, "LatestMany")
	requireMeta(t, many[1], &ada, "LatestMany: a write's own over the Update's")
	for d, err := range users.LatestAll(tipkv.Query{}) {
		require.NoError(t, err)
		requireMeta(t, d, map[string]*tipkv.Metadata{"a": &job, "b": &job, "c": &ada}[d.ID], "LatestAll")
	}
	require.NoError(t, db.View(func(s *tipkv.Snapshot) error {
		d, err := users.In(s).Get("a", 1)
		require.NoError(t, err)
		requireMeta(t, d, nil, "a snapshot's Get")
		return nil
	}))
	if b.Reopen != nil {
		db = b.Reopen(t, db, nil)
		users = people(t, db)
		d, err := users.Get("a", 2)
		require.NoError(t, err)
		requireMeta(t, d, &ada, "after a reopen")
	}
}

// Metadata past its bounds fails the write with ErrInvalid, and the write
// (or the Update) writes nothing.
func testMetadataBounds(t *testing.T, b backend) {
	db, users := openPeople(t, b)
	long := strings.Repeat("x", tipkv.MaxMetadataField+1)
	many := map[string]string{}
	for i := range tipkv.MaxMetadataHeaders + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, m := range []tipkv.Metadata{{Author: long}, {Reason: long}, {CorrelationID: long}, {CausationID: long},
		{Headers: map[string]string{"k": long}}, {Headers: map[string]string{"": "v"}}, {Headers: many}} {
		_, err := users.Put(tipkv.WithMetadata(db, m), "a", person{})
		require.ErrorIs(t, err, tipkv.ErrInvalid)
		err = db.Update(func(tx *tipkv.Batch) error {
			if _, err := users.Put(tx, "b", person{}); err != nil {
				return err
			}
			return tx.SetMetadata(m)
		})
		require.ErrorIs(t, err, tipkv.ErrInvalid)
	}
	for _, id := range []string{"a", "b"} {
		n, err := users.Count(id)
		require.NoError(t, err)
		require.Zero(t, n, "nothing written")
	}
	ok := tipkv.Metadata{Author: strings.Repeat("a", tipkv.MaxMetadataField), Reason: strings.Repeat("r", tipkv.MaxMetadataField)}
	_, err := users.Put(tipkv.WithMetadata(db, ok), "a", person{})
	require.NoError(t, err, "at the bounds")
	d, err := users.Latest("a")
	require.NoError(t, err)
	requireMeta(t, d, &ok, "at the bounds")
}

// An Update that runs again on a shared engine (another process wrote its
// document first) writes its metadata once, on the version it commits.
func testMetadataRetriedUpdate(t *testing.T, b backend) {
	if b.Second == nil {
		t.Skip("one handle only: an exclusive engine")
	}
	dbA := b.Open(t, nil)
	dbB := b.Second(t, dbA, nil)
	a, bb := people(t, dbA), people(t, dbB)
	putN(t, a, dbA, "x", 1)
	var runs atomic.Int64
	m := tipkv.Metadata{Author: "a", Reason: "retried"}
	require.NoError(t, dbA.Update(func(tx *tipkv.Batch) error {
		if runs.Add(1) == 1 {
			_, err := bb.Put(dbB, "x", person{Name: "B first"}) // A's view of x is now stale
			require.NoError(t, err)
		}
		if err := tx.SetMetadata(m); err != nil {
			return err
		}
		_, err := a.Put(tx, "x", person{Name: "A"})
		return err
	}))
	require.Equal(t, int64(2), runs.Load(), "the Update ran again")
	hist := testutil.Collect(t, a.History("x", tipkv.Query{}))
	require.Equal(t, []int64{3, 2, 1}, versionsOf(hist))
	requireMeta(t, hist[0], &m, "the version the Update committed")
	requireMeta(t, hist[1], nil, "B's version")
	requireMeta(t, hist[2], nil, "the first version")
}

// Feed events carry metadata as versions do: set on the Append (a DB or a
// Batch, through WithMetadata) or on the Update, a write's own over the
// Update's; Newest, Since and Follow return it, decoded on asking; an
// event written without has none, and a raw event whose bytes start with
// C1 (the header's first byte) reads back as written, with or without.
func testEventMetadataRoundTrip(t *testing.T, b backend) {
	db := b.Open(t, nil)
	raw, err := versioned.NewFeed[[]byte](db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	require.NoError(t, err)
	ada := tipkv.Metadata{Author: "ada", Reason: "fix a typo", CorrelationID: "req-1", Headers: map[string]string{"tenant": "t1"}}
	job := tipkv.Metadata{Author: "import-job"}
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	type want struct {
		value []byte
		meta  *tipkv.Metadata
	}
	wants := map[int64]want{}
	appendAt := func(w tipkv.Writer, i int, v []byte, m *tipkv.Metadata) {
		t.Helper()
		p, err := raw.AppendAt(w, "s", at(i), v)
		require.NoError(t, err)
		wants[p] = want{v, m}
	}
	appendAt(db, 1, []byte("plain"), nil)
	appendAt(tipkv.WithMetadata(db, ada), 2, []byte("by ada"), &ada)
	appendAt(db, 3, []byte{0xc1, 0x20, 0x01, 'x'}, nil) // a header's bytes, stored escaped
	appendAt(db, 4, []byte{0xc1}, nil)
	appendAt(tipkv.WithMetadata(db, ada), 5, []byte{0xc1, 0x00}, &ada)
	var inUpdate map[int64]want // the last run's: a shared engine may run it again
	require.NoError(t, db.Update(func(tx *tipkv.Batch) error {
		inUpdate = map[int64]want{}
		if err := tx.SetMetadata(job); err != nil {
			return err
		}
		p, err := raw.AppendAt(tx, "s", at(6), []byte("the Update's"))
		if err != nil {
			return err
		}
		inUpdate[p] = want{[]byte("the Update's"), &job}
		p, err = raw.AppendAt(tipkv.WithMetadata(tx, ada), "s", at(7), []byte("its own"))
		if err != nil {
			return err
		}
		inUpdate[p] = want{[]byte("its own"), &ada}
		return nil
	}))
	maps.Copy(wants, inUpdate)
	p, dup, err := raw.AppendOnce(tipkv.WithMetadata(db, job), "s", "k", tipkv.UntilForgotten(), []byte("once"))
	require.NoError(t, err)
	require.False(t, dup)
	wants[p] = want{[]byte("once"), &job}

	check := func(what string, e versioned.Event[[]byte]) {
		t.Helper()
		w, ok := wants[e.Position]
		require.True(t, ok, "%s: an event at position %d that no append returned", what, e.Position)
		require.Equal(t, w.value, e.Value, "%s: position %d", what, e.Position)
		got, err := e.Metadata()
		require.NoError(t, err, what)
		if w.meta == nil {
			require.False(t, e.HasMetadata(), "%s: position %d", what, e.Position)
			require.Equal(t, tipkv.Metadata{}, got, what)
			return
		}
		require.True(t, e.HasMetadata(), "%s: position %d", what, e.Position)
		require.Equal(t, *w.meta, got, "%s: position %d", what, e.Position)
	}
	n := 0
	for e, err := range raw.Newest("s", tipkv.Query{}) {
		require.NoError(t, err)
		check("Newest", e)
		n++
	}
	for e, err := range raw.Since("s", 0, tipkv.Query{}) {
		require.NoError(t, err)
		check("Since", e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := 0
	for e, err := range raw.Follow(ctx, "s", 0) {
		require.NoError(t, err)
		check("Follow", e)
		if k++; k == n {
			break
		}
	}
	require.Equal(t, n, k)
	require.Equal(t, len(wants), n)
}
