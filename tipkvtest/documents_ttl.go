package tipkvtest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/fakes"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

func documentTTLCases() []testCase {
	return []testCase{
		{"TTLHidesExpiredVersions", checked(testTTLHidesExpiredVersions)},
		{"TTLPurgeExpired", checked(testTTLPurgeExpired)},
		{"TTLPurgeRacingPuts", checked(testTTLPurgeRacingPuts)},
		{"TTLPurgeKeepsDocumentPurgedAndWrittenAgain", checked(testTTLPurgeKeepsRewritten)},
		{"TTLPurgeInTheBackgroundAndAfterRestart", checked(testTTLPurgeInTheBackground)},
	}
}

const ttl = time.Minute

func expiring(t testing.TB, db *tipkv.DB, purgeEvery time.Duration) *versioned.Collection[person] {
	t.Helper()
	c, err := versioned.NewCollection[person](db, "sessions", &versioned.Options[person]{TTL: ttl, PurgeInterval: purgeEvery})
	require.NoError(t, err)
	return c
}

// clockOpts returns DB options whose clock is clock.
func clockOpts(clock *testutil.Clock) *tipkv.Options { return &tipkv.Options{Clock: clock.Now} }

// Each version reads as gone from TTL after its write: Latest, Get and
// AsOf answer ErrNotFound, History and LatestAll skip it, and PutIf(0)
// takes an expired document for missing without reusing its versions.
func testTTLHidesExpiredVersions(t *testing.T, b backend) {
	clock := testutil.NewClock(t0)
	db := b.Open(t, clockOpts(clock))
	_, err := versioned.NewCollection[person](db, "bad", &versioned.Options[person]{TTL: -time.Second})
	require.ErrorIs(t, err, tipkv.ErrInvalid)
	c := expiring(t, db, -1)
	plain, err := versioned.NewCollection[person](db, "sessions", nil) // reads the expiry of each version too
	require.NoError(t, err)

	_, err = c.Put(db, "a", person{Name: "a1"})
	require.NoError(t, err)
	_, err = c.Put(db, "b", person{Name: "b1"})
	require.NoError(t, err)
	clock.Set(t0.Add(30 * time.Second))
	_, err = c.Put(db, "a", person{Name: "a2"})
	require.NoError(t, err)

	clock.Set(t0.Add(45 * time.Second)) // nothing expired
	require.Equal(t, []int64{2, 1}, versionsOf(testutil.Collect(t, c.History("a", tipkv.Query{}))))
	require.Len(t, testutil.Collect(t, c.LatestAll(tipkv.Query{})), 2)

	clock.Set(t0.Add(ttl + 10*time.Second)) // a1 and b1 expired, a2 not
	for _, r := range []*versioned.Collection[person]{c, plain} {
		d, err := r.Latest("a")
		require.NoError(t, err)
		require.Equal(t, "a2", d.Value.Name)
		_, err = r.Get("a", 1)
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		_, err = r.AsOf("a", 1)
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		_, err = r.Latest("b")
		require.ErrorIs(t, err, tipkv.ErrNotFound)
		require.Contains(t, err.Error(), "expired")
		require.Equal(t, []int64{2}, versionsOf(testutil.Collect(t, r.History("a", tipkv.Query{}))))
		require.Equal(t, []int64{2}, versionsOf(testutil.Collect(t, r.History("a", tipkv.Query{Limit: 1}))))
		require.Empty(t, testutil.Collect(t, r.History("b", tipkv.Query{})), "its only version expired (History sought it again for ever)")
		require.Equal(t, []string{"a"}, idsOf(testutil.Collect(t, r.LatestAll(tipkv.Query{}))))
		many, err := r.LatestMany("a", "b")
		require.NoError(t, err)
		require.Equal(t, "a2", many[0].Value.Name)
		require.Zero(t, many[1].Version, "b has expired")
	}
	count, err := c.Count("b")
	require.NoError(t, err)
	require.EqualValues(t, 1, count, "expired, not purged yet")

	// PutIf(0) creates an expired document again, after its versions.
	_, err = c.PutIf(db, "a", person{Name: "a3"}, 0)
	require.ErrorIs(t, err, tipkv.ErrConflict, "a2 is live")
	v, err := c.PutIf(db, "b", person{Name: "b2"}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, v)
	db2 := db
	if b.Second != nil {
		db2 = b.Second(t, db, clockOpts(clock))
	}
	c2 := expiring(t, db2, -1)
	clock.Set(t0.Add(3 * ttl)) // everything expired
	v, err = c2.PutIf(db2, "a", person{Name: "a3"}, 0)
	require.NoError(t, err, "another handle that has not read a takes it for missing too")
	require.EqualValues(t, 3, v)
	d, err := c.Latest("a")
	require.NoError(t, err)
	require.Equal(t, "a3", d.Value.Name)
}

// PurgeExpired drops the whole history of every document whose latest
// version has expired, and nothing else; a document written again starts
// at version 1.
func testTTLPurgeExpired(t *testing.T, b backend) {
	clock := testutil.NewClock(t0)
	db := b.Open(t, clockOpts(clock))
	c := expiring(t, db, -1)
	plain := people(t, db)
	n := b.N(40)
	for i := range n {
		putN(t, c, db, fmt.Sprint("old", i), 3)
	}
	_, err := plain.Put(db, "forever", person{Name: "no ttl"}) // another collection
	require.NoError(t, err)
	clock.Set(t0.Add(ttl))
	putN(t, c, db, "new", 2)
	_, err = c.Put(db, "old0", person{Name: "again"}) // live again
	require.NoError(t, err)

	st, err := c.PurgeExpired(context.Background())
	require.NoError(t, err)
	require.Equal(t, versioned.PurgeStats{Documents: n + 1, Purged: n - 1, Versions: int64(3 * (n - 1))}, st)
	for i := 1; i < n; i++ {
		count, err := c.Count(fmt.Sprint("old", i))
		require.NoError(t, err)
		require.Zero(t, count)
	}
	count, err := c.Count("old0")
	require.NoError(t, err)
	require.EqualValues(t, 4, count, "old0 is live: kept whole")
	require.Equal(t, []int64{4}, versionsOf(testutil.Collect(t, c.History("old0", tipkv.Query{}))), "its expired versions hidden")
	require.Equal(t, []int64{2, 1}, versionsOf(testutil.Collect(t, c.History("new", tipkv.Query{}))))
	_, err = plain.Latest("forever")
	require.NoError(t, err)

	v, err := c.Put(db, "old1", person{Name: "reborn"})
	require.NoError(t, err)
	require.EqualValues(t, 1, v, "a purge restarts the versions")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.PurgeExpired(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

// A purge racing a Put of the same document never drops the new version:
// the purge holds only while the latest version is the expired one.
func testTTLPurgeRacingPuts(t *testing.T, b backend) {
	clock := testutil.NewClock(t0)
	db := b.Open(t, clockOpts(clock))
	db2 := db
	if b.Second != nil {
		db2 = b.Second(t, db, clockOpts(clock))
	}
	c, c2 := expiring(t, db, -1), expiring(t, db2, -1)
	ids := []string{"a", "b", "c", "d"}
	for round := range b.N(40) {
		for _, id := range ids {
			_, err := c.Put(db, id, person{Name: "old"})
			require.NoError(t, err)
		}
		clock.Set(clock.Now().Add(ttl))
		var wg sync.WaitGroup
		spawn(&wg, func() {
			if _, err := c.PurgeExpired(context.Background()); err != nil {
				t.Error(err)
			}
		})
		for _, id := range ids {
			spawn(&wg, func() {
				if _, err := c2.Put(db2, id, person{Name: fmt.Sprint("new", round)}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			d, err := c.Latest(id)
			require.NoError(t, err, "round %d, %s", round, id)
			require.Equal(t, fmt.Sprint("new", round), d.Value.Name)
		}
	}
}

// A pass that found a document expired does not purge it once another
// pass has purged it and a Put has written it again, although the new
// version has the number the expired one had (a purge restarts versions at
// 1): a pass purges what is stored and expired when it purges, not a
// version number it noted. The second pass and the Put run, on this handle
// and on another process's, between the first pass's walk and its purges
// (when the walk's iterator closes), so the interleaving is the same on
// every run.
func testTTLPurgeKeepsRewritten(t *testing.T, b backend) {
	for _, other := range []bool{false, true} {
		name := "same handle"
		if other {
			name = "other handle"
		}
		t.Run(name, func(t *testing.T) {
			if other && b.Second == nil {
				t.Skip("one handle per store on an exclusive engine")
			}
			clock := testutil.NewClock(t0)
			base := b.Open(t, clockOpts(clock))
			s, err := link.StoreOf(base)
			require.NoError(t, err)
			hs := fakes.Borrow(s)
			db, err := tipkv.OpenEngine(hs, "hooked", clockOpts(clock))
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			c := expiring(t, db, -1)
			db2, c2 := db, c
			if other {
				db2 = b.Second(t, base, clockOpts(clock))
				c2 = expiring(t, db2, -1)
			}
			for _, id := range []string{"a", "b", "c"} {
				_, err := c.Put(db, id, person{Name: "old " + id})
				require.NoError(t, err)
			}
			clock.Set(t0.Add(ttl)) // every version has expired

			walk := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "sessions")
			ran := false
			hs.OnIterClose(func(lo []byte) bool { return bytes.Equal(lo, walk) }, func() {
				ran = true
				st, err := c2.PurgeExpired(context.Background())
				require.NoError(t, err)
				require.Equal(t, 3, st.Purged)
				v, err := c2.Put(db2, "a", person{Name: "new a"})
				require.NoError(t, err)
				require.EqualValues(t, 1, v, "versions start again after the purge")
			})
			st, err := c.PurgeExpired(context.Background())
			require.NoError(t, err)
			require.True(t, ran, "the pass's walk did not close an iterator over the collection")
			require.Equal(t, 0, st.Purged, "the second pass purged all three; a is live again")

			for _, r := range []*versioned.Collection[person]{c, c2} {
				d, err := r.Latest("a")
				require.NoError(t, err, "a was written again after the purge and expires at %v", t0.Add(2*ttl))
				require.Equal(t, "new a", d.Value.Name)
				require.EqualValues(t, 1, d.Version)
				for _, id := range []string{"b", "c"} {
					n, err := r.Count(id)
					require.NoError(t, err)
					require.Zero(t, n, id)
				}
			}
			clock.Set(t0.Add(2 * ttl)) // now a has expired again: a pass purges it
			st, err = c.PurgeExpired(context.Background())
			require.NoError(t, err)
			require.Equal(t, 1, st.Purged)
			_, err = c2.Latest("a")
			require.ErrorIs(t, err, tipkv.ErrNotFound)
		})
	}
}

// A handle with a TTL purges expired documents in the background, at
// once when it is created (so after a restart too), and stops with Close.
func testTTLPurgeInTheBackground(t *testing.T, b backend) {
	if b.Reopen == nil {
		t.Skip("the backend cannot reopen a store")
	}
	clock := testutil.NewClock(t0)
	db := b.Open(t, clockOpts(clock))
	c := expiring(t, db, -1)
	putN(t, c, db, "a", 2)
	putN(t, c, db, "b", 1)
	clock.Set(t0.Add(ttl))
	putN(t, c, db, "live", 1)

	log := newPassLog("tipkv: purge of expired documents")
	db = b.Reopen(t, db, &tipkv.Options{Clock: clock.Now, Logger: slog.New(log)})
	c = expiring(t, db, time.Millisecond)
	deadline := time.After(2 * time.Minute) // a guard against a hang, not a window
	for {
		na, err := c.Count("a")
		require.NoError(t, err)
		nb, err := c.Count("b")
		require.NoError(t, err)
		if na == 0 && nb == 0 {
			break
		}
		select {
		case <-log.passes:
		case <-deadline:
			t.Fatalf("a (%d versions) and b (%d) not purged after two minutes of passes", na, nb)
		}
	}
	_, err := c.Latest("live")
	require.NoError(t, err)
	require.NoError(t, db.Close())
}
