package sqlkv_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/sqlkv"
)

func scanAll(t testing.TB, it engine.Iter) []string {
	t.Helper()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%x=%s", it.Key(), v))
	}
	require.NoError(t, it.Error())
	return out
}

// An iterator over many pages reads one view while other writers insert,
// update and delete on every page of its range, ahead of it and behind.
func TestPagingReadsOneView(t *testing.T) {
	s := openStore(t, sqlkv.Config{})
	w := second(t, s)
	const n = 2000
	for start := 1; start <= n; start += 500 {
		require.NoError(t, apply(s, func(b engine.Batch) {
			for i := start; i < start+500; i++ {
				_ = b.Set(qkey("q", int64(2*i)), []byte(fmt.Sprint(i)))
			}
		}))
	}
	snap, err := s.NewSnapshot()
	require.NoError(t, err)
	defer snap.Close()
	sit, err := snap.NewIter(qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.NoError(t, err)
	want := scanAll(t, sit)
	require.NoError(t, sit.Close())
	require.Len(t, want, n)

	it, err := s.NewIter(qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.NoError(t, err)
	var got []string
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		require.NoError(t, err)
		got = append(got, fmt.Sprintf("%x=%s", it.Key(), v))
		if i%97 == 0 { // churn on every page: behind, at and ahead of the iterator
			require.NoError(t, apply(w, func(b engine.Batch) {
				_ = b.Set(qkey("q", int64(2*i+1)), []byte("inserted"))
				_ = b.Set(qkey("q", int64(2*(i+50))), []byte("updated"))
				_ = b.Delete(qkey("q", int64(2*(i+300))))
				_ = b.DeleteRange(qkey("q", int64(2*(i+600))), qkey("q", int64(2*(i+610))))
			}))
		}
		i++
	}
	require.NoError(t, it.Error())
	require.NoError(t, it.Close())
	require.Equal(t, want, got, "the iterator saw only its view")
}

// A short range read whole on its first page holds no connection after
// it; a longer one holds one until Close; Close returns it.
func TestIteratorConnections(t *testing.T) {
	s := openStore(t, sqlkv.Config{})
	for i := int64(1); i <= 100; i++ {
		mustSet(t, s, qkey("long", i), []byte("x"))
	}
	mustSet(t, s, qkey("short", 1), []byte("x"), qkey("short", 2), []byte("y"))
	// Background commits of released views finish on their own.
	idle := func() {
		for s.Pool().Stat().AcquiredConns() != 0 {
			time.Sleep(time.Millisecond) // waiting for the event, not for a time
		}
	}
	idle()
	short, err := s.NewIter(qprefix("short"), codec.PrefixEnd(qprefix("short")))
	require.NoError(t, err)
	require.Len(t, scanAll(t, short), 2)
	idle() // the view was released at the first page
	require.True(t, short.Last(), "seeks after release are answered from memory")
	require.Equal(t, qkey("short", 2), short.Key())
	require.True(t, short.SeekGE(qkey("short", 2)))
	require.NoError(t, short.Close())

	long, err := s.NewIter(qprefix("long"), codec.PrefixEnd(qprefix("long")))
	require.NoError(t, err)
	require.True(t, long.First())
	require.EqualValues(t, 1, s.Pool().Stat().AcquiredConns(), "a paged iterator holds its view")
	require.Len(t, scanAll(t, long), 100)
	require.True(t, long.Last())
	require.Equal(t, qkey("long", 100), long.Key())
	require.NoError(t, long.Close())
	idle()
}

// Seeks on a snapshot's iterators: SeekPrefixGE stays within the prefix,
// NextPrefix visits each document once at its newest version, Last is the
// last key below the bound.
func TestSnapshotSeeks(t *testing.T) {
	s := openStore(t, sqlkv.Config{})
	ids := []string{"a", "a\x00", "b", "doc-1", "doc-10"}
	require.NoError(t, apply(s, func(b engine.Batch) {
		for n, id := range ids {
			for v := int64(1); v <= int64(n+1)*7; v++ { // up to 35 versions: several pages
				_ = b.Set(vkey(id, v), []byte(fmt.Sprint(v)))
			}
		}
	}))
	snap, err := s.NewSnapshot()
	require.NoError(t, err)
	defer snap.Close()
	mustSet(t, s, vkey("a", 100), []byte("after the snapshot"))
	lo := codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "c")
	it, err := snap.NewIter(lo, codec.PrefixEnd(lo))
	require.NoError(t, err)
	defer it.Close()
	var newest []string
	for ok := it.First(); ok; ok = it.NextPrefix() {
		v, _ := it.Value()
		newest = append(newest, string(v))
	}
	require.Equal(t, []string{"7", "14", "21", "28", "35"}, newest)
	n := 0
	for ok := it.SeekPrefixGE(doc("doc-1")); ok; ok = it.Next() {
		require.True(t, bytes.HasPrefix(it.Key(), doc("doc-1")))
		n++
	}
	require.Equal(t, 28, n, "SeekPrefixGE stays within doc-1 (doc-10 follows it)")
	require.True(t, it.Last())
	require.Equal(t, vkey("doc-10", 1), it.Key())
	v, err := snap.Get(vkey("a", 100))
	require.ErrorIs(t, err, engine.ErrNotFound, "the snapshot predates it (%s)", v)
}

// Close ends a snapshot and its iterators: their next calls report
// ErrClosed, and no connection stays acquired.
func TestCloseEndsViews(t *testing.T) {
	s, err := sqlkv.NewStore(context.Background(), sqlkv.Config{DSN: dsn(t), Table: newTable(t)})
	require.NoError(t, err)
	for i := int64(1); i <= 50; i++ {
		mustSet(t, s, qkey("q", i), []byte("x"))
	}
	snap, err := s.NewSnapshot()
	require.NoError(t, err)
	it, err := s.NewIter(qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.NoError(t, err)
	require.True(t, it.First())
	ch, err := s.Watch(context.Background(), stateKey("a"), stateKey("b"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for it.Next() {
	}
	require.ErrorIs(t, it.Error(), engine.ErrClosed)
	_, err = snap.Get(qkey("q", 1))
	require.ErrorIs(t, err, engine.ErrClosed)
	_, ok := <-ch
	require.False(t, ok, "Close closes watches")
	require.NoError(t, snap.Close())
	require.NoError(t, it.Close())
}

// A read that says it wants one key (engine.NewIterN with n = 1: a
// document's newest version) is one round trip: BEGIN and one page of
// LIMIT 1, with the COMMIT of the view before it in front; no COMMIT of
// its own, no second page.
func TestPointReadIsOneRoundTrip(t *testing.T) {
	s, tr := tracedStore(t, sqlkv.Config{})
	require.NoError(t, apply(s, func(b engine.Batch) {
		for v := int64(1); v <= 20; v++ {
			_ = b.Set(vkey("d", v), []byte(fmt.Sprint(v)))
		}
	}))
	lo := doc("d")
	hi := codec.PrefixEnd(lo)
	tr.take()
	const reads = 20
	for range reads {
		it, err := engine.NewIterN(s, lo, hi, 1)
		require.NoError(t, err)
		require.True(t, it.SeekPrefixGE(lo))
		require.Equal(t, vkey("d", 20), it.Key())
		require.NoError(t, it.Close())
	}
	var pages, commitsInFront int
	for _, trip := range tr.take() {
		if !hasSQL(trip, "ORDER BY k") {
			// The sweep commits a view parked too long on its own: only
			// on a machine slow enough to idle parkFor between reads.
			require.Equal(t, "COMMIT", trip[0].sql, "a round trip of its own: %v", trip)
			require.Len(t, trip, 1)
			continue
		}
		pages++
		last := trip[len(trip)-1]
		require.Contains(t, last.sql, "LIMIT $3", "one page")
		require.EqualValues(t, 1, last.args[2], "a page of one row")
		require.Contains(t, trip[len(trip)-2].sql, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
		if trip[0].sql == "COMMIT" {
			commitsInFront++
		}
	}
	require.Equal(t, reads, pages, "one round trip per read")
	require.Positive(t, commitsInFront, "a view's COMMIT rides in front of the next view")
	// Unhinted, the first page is firstPage rows.
	it, err := s.NewIter(lo, hi)
	require.NoError(t, err)
	require.True(t, it.First())
	require.NoError(t, it.Close())
	for _, trip := range tr.take() {
		if hasSQL(trip, "ORDER BY k") { // not the sweep's COMMIT
			require.EqualValues(t, 8, trip[len(trip)-1].args[2])
		}
	}
}

// A parked view's connection (its read-only transaction finished, its
// COMMIT not yet sent) that breaks meanwhile is replaced: the next read
// succeeds on a connection from the pool. An idle store's parked views
// are committed and their connections returned to the pool.
//
// The test counts only backends of its own pool (its application_name),
// and after terminating one waits until the server has removed it: a
// backend that is still exiting shows in pg_stat_activity with its last
// state, and terminating it again would count it twice.
func TestParkedViews(t *testing.T) {
	restore := sqlkv.SetParkFor(time.Hour) // parked until the next read
	defer restore()
	const app = "sqlkv_parked"
	pool, err := pgxpool.NewWithConfig(context.Background(), poolConfig(t, app))
	require.NoError(t, err)
	t.Cleanup(pool.Close) // after the store's Close, which ends the parked view
	s := openStore(t, sqlkv.Config{Pool: pool})
	for i := int64(1); i <= 50; i++ {
		mustSet(t, s, qkey("q", i), []byte("x"))
	}
	read := func() {
		it, err := engine.NewIterN(s, qprefix("q"), codec.PrefixEnd(qprefix("q")), 2)
		require.NoError(t, err)
		require.True(t, it.First())
		require.Equal(t, qkey("q", 1), it.Key())
		require.NoError(t, it.Close())
	}
	for i := range 10 {
		read()
		// Break the connection parked by the read: the next read must
		// not fail.
		var pids []int32
		rows, err := s.Pool().Query(context.Background(), `WITH parked AS MATERIALIZED (
			SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction')
			SELECT pid FROM parked WHERE pg_terminate_backend(pid)`, app)
		require.NoError(t, err)
		for rows.Next() {
			var pid int32
			require.NoError(t, rows.Scan(&pid))
			pids = append(pids, pid)
		}
		require.NoError(t, rows.Err())
		require.Len(t, pids, 1, "read %d parked its connection, and only it", i)
		waitFor(t, s, nil, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1))", pids)
	}
	read()
	require.EqualValues(t, 1, s.Pool().Stat().AcquiredConns(), "parked")

	restore()
	s2 := second(t, s)
	it, err := s2.NewIter(qprefix("q"), codec.PrefixEnd(qprefix("q")))
	require.NoError(t, err)
	require.True(t, it.First())
	require.NoError(t, it.Close())
	for s2.Pool().Stat().AcquiredConns() != 0 { // the sweep returns it
		time.Sleep(time.Millisecond) // waiting for the event, not for a time
	}
}
