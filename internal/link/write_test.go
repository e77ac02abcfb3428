package link_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/faultstore"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/pebblestore"
	"github.com/tipkv/tipkv/internal/testutil"
)

// The Tx and the store's batch behind a Batch are recycled. A Batch kept
// past its Update stays refused while later Updates run on the recycled
// Tx, and what it tried to write lands in none of them.
func TestKeptBatchStaysOutOfLaterUpdates(t *testing.T) {
	db := testutil.OpenMem(t)
	var kept *tipkv.Batch
	require.NoError(t, db.Update(func(b *tipkv.Batch) error { kept = b; return testutil.PutRaw(b, "\x06a", "1") }))
	for i := range 20 {
		require.NoError(t, db.Update(func(b *tipkv.Batch) error {
			require.ErrorIs(t, testutil.PutRaw(kept, "\x06stale", "x"), tipkv.ErrInvalid)
			return testutil.PutRaw(b, "\x06b", strconv.Itoa(i))
		}))
		require.ErrorIs(t, testutil.PutRaw(kept, "\x06stale", "x"), tipkv.ErrInvalid)
	}
	_, err := get(t, db, "\x06stale")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	v, err := get(t, db, "\x06b")
	require.NoError(t, err)
	require.Equal(t, "19", v)
}

// Hooks of an aborted or committed Update do not run again in a later one
// that reuses its Tx.
func TestRecycledTxKeepsNoHooks(t *testing.T) {
	db := testutil.OpenMem(t)
	var committed, aborted int
	hook := func(b *tipkv.Batch) error {
		return link.Write(b, func(tx *link.Tx) error {
			tx.OnCommit(func() { committed++ })
			tx.OnAbort(func() { aborted++ })
			return tx.Batch.Set([]byte("\x06h"), []byte("v"))
		})
	}
	require.NoError(t, db.Update(hook))
	require.Error(t, db.Update(func(b *tipkv.Batch) error {
		require.NoError(t, hook(b))
		return tipkv.ErrInvalid
	}))
	for range 10 {
		require.NoError(t, db.Update(func(b *tipkv.Batch) error { return testutil.PutRaw(b, "\x06x", "y") }))
		require.NoError(t, testutil.PutRaw(db, "\x06x", "z"))
	}
	require.Equal(t, 1, committed)
	require.Equal(t, 1, aborted)
}

// The write path's own allocations: one Update allocates its Batch and
// nothing else of tipkv's (the Tx and the store's batch are recycled); a
// write on the DB allocates nothing of its own.
func TestUpdateAllocations(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	db := testutil.OpenMem(t)
	empty := func(*tipkv.Batch) error { return nil }
	require.NoError(t, db.Update(empty))
	n := testing.AllocsPerRun(200, func() { _ = db.Update(empty) })
	require.LessOrEqual(t, n, 1.0, "allocations per empty Update")
	noop := func(*link.Tx) error { return nil }
	n = testing.AllocsPerRun(200, func() { _ = link.Write(db, noop) })
	require.LessOrEqual(t, n, 0.0, "allocations per write on the DB")
}

// openFaulty opens a DB on an in-memory Pebble store whose commits fail
// with the given odds.
func openFaulty(t *testing.T, odds faultstore.Odds, retries int) (*tipkv.DB, *faultstore.Store) {
	t.Helper()
	ps, err := pebblestore.Open("mem", pebblestore.Config{InMemory: true, CacheSize: 1 << 20, MemTableSize: 1 << 20})
	require.NoError(t, err)
	fs := faultstore.New(ps, faultstore.Odds{}, 1) // no faults while the DB opens
	db, err := tipkv.OpenEngine(fs, "faulty", &tipkv.Options{MaxRetries: retries})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	fs.SetOdds(odds)
	return db, fs
}

// The retry policy is the same for an Update and for a package's write on
// the DB (link.Write): a failed condition runs the function again, at most
// MaxRetries more times, then fails with ErrConflict; WriteOnce hands the
// failed condition back after one try; an unknown outcome is never run
// again. Each failed try runs the abort hooks once.
func TestWritePathRetries(t *testing.T) {
	cond := func(tries, aborts *int) func(tx *link.Tx) error {
		return func(tx *link.Tx) error {
			*tries++
			tx.OnAbort(func() { *aborts++ })
			if err := tx.Batch.Require(engine.Absent([]byte("\x06nothing"))); err != nil {
				return err
			}
			return tx.Batch.Set([]byte("\x06k"), []byte("v"))
		}
	}
	db, _ := openFaulty(t, faultstore.Odds{ConditionFailed: 1}, 2)
	paths := map[string]func(f func(*link.Tx) error) error{
		"update": func(f func(*link.Tx) error) error {
			return db.Update(func(b *tipkv.Batch) error { return link.Write(b, f) })
		},
		"write": func(f func(*link.Tx) error) error { return link.Write(db, f) },
	}
	for name, path := range paths {
		tries, aborts := 0, 0
		err := path(cond(&tries, &aborts))
		require.ErrorIs(t, err, tipkv.ErrConflict, name)
		require.ErrorIs(t, err, engine.ErrConditionFailed, name)
		require.Equal(t, 3, tries, "%s: one try and MaxRetries more", name)
		require.Equal(t, 3, aborts, name)
	}
	tries, aborts := 0, 0
	err := link.WriteOnce(db, cond(&tries, &aborts))
	require.ErrorIs(t, err, engine.ErrConditionFailed)
	require.NotErrorIs(t, err, tipkv.ErrConflict)
	require.Equal(t, 1, tries)
	require.Equal(t, 1, aborts)

	db2, _ := openFaulty(t, faultstore.Odds{UnknownLost: 1}, 2)
	for name, path := range map[string]func(f func(*link.Tx) error) error{
		"update": func(f func(*link.Tx) error) error {
			return db2.Update(func(b *tipkv.Batch) error { return link.Write(b, f) })
		},
		"write": func(f func(*link.Tx) error) error { return link.Write(db2, f) },
	} {
		tries, aborts := 0, 0
		err := path(cond(&tries, &aborts))
		require.ErrorIs(t, err, tipkv.ErrUnknownOutcome, name)
		require.Equal(t, 1, tries, "%s: an unknown outcome is never retried", name)
	}
}

// A package's write on the DB that panics aborts its Tx (the abort hooks
// run, nothing is written) and the panic goes on; the DB keeps working.
func TestWriteOnDBPanicAborts(t *testing.T) {
	db := testutil.OpenMem(t)
	aborted := 0
	require.PanicsWithValue(t, "boom", func() {
		_ = link.Write(db, func(tx *link.Tx) error {
			tx.OnAbort(func() { aborted++ })
			_ = tx.Batch.Set([]byte("\x06p"), []byte("v"))
			panic("boom")
		})
	})
	require.Equal(t, 1, aborted)
	_, err := get(t, db, "\x06p")
	require.ErrorIs(t, err, tipkv.ErrNotFound)
	require.NoError(t, testutil.PutRaw(db, "\x06p", "w"))
	v, err := get(t, db, "\x06p")
	require.NoError(t, err)
	require.Equal(t, "w", v)
}

// get reads one raw key from db's store.
func get(t *testing.T, db *tipkv.DB, key string) (string, error) {
	t.Helper()
	s, err := link.StoreOf(db)
	require.NoError(t, err)
	v, err := s.Get([]byte(key))
	return string(v), err
}
