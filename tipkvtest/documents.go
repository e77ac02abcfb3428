package tipkvtest

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/testutil"
	"github.com/tipkv/tipkv/versioned"
)

// documentCases returns the documents tests, family by family: writing
// versions (documents_versions.go), deletes and drops
// (documents_deletes.go), reads (documents_reads.go), the model test and
// the default codec's names (documents_model.go), the miss filter
// (documents_filter.go), concurrent writers (documents_concurrency.go),
// shared engines (documents_shared.go) and Watch (documents_watch.go); the
// time to live has its own suite (documents_ttl.go). Each ends with its
// stores checked healthy (checked). What is about Pebble itself (seek
// counts, bloom filters, how drops are written) stays in versioned's own
// tests.
func documentCases() []testCase {
	return slices.Concat(
		documentVersionCases(),
		documentDeleteCases(),
		documentReadCases(),
		documentModelCases(),
		documentFilterCases(),
		documentConcurrencyCases(),
		documentSharedCases(),
		documentTimeCases(),
		documentMetadataCases(),
		documentRepairCases(),
		watchCases(),
	)
}

// person is the document type of these tests.
type person struct {
	Name string `msgpack:"name"`
	Age  int    `msgpack:"age"`
}

// people returns the collection "users" of db.
func people(t testing.TB, db *tipkv.DB) *versioned.Collection[person] {
	t.Helper()
	c, err := versioned.NewCollection[person](db, "users", nil)
	require.NoError(t, err)
	return c
}

// openPeople opens a DB on the backend and returns it with its "users".
func openPeople(t testing.TB, b backend) (*tipkv.DB, *versioned.Collection[person]) {
	t.Helper()
	db := b.Open(t, nil)
	return db, people(t, db)
}

// versionsOf returns the versions of docs, in order.
func versionsOf[T any](docs []versioned.Doc[T]) []int64 {
	var out []int64
	for _, d := range docs {
		out = append(out, d.Version)
	}
	return out
}

// idsOf returns the ids of docs, in order.
func idsOf[T any](docs []versioned.Doc[T]) []string {
	var out []string
	for _, d := range docs {
		out = append(out, d.ID)
	}
	return out
}

// deletedOf returns which of docs are delete markers, in order.
func deletedOf[T any](docs []versioned.Doc[T]) []bool {
	var out []bool
	for _, d := range docs {
		out = append(out, d.Deleted)
	}
	return out
}

// putN writes versions until the document has n more.
func putN(t testing.TB, c *versioned.Collection[person], w tipkv.Writer, id string, n int) {
	t.Helper()
	for i := range n {
		_, err := c.Put(w, id, person{Name: id, Age: i})
		require.NoError(t, err)
	}
}

// rawSet writes a key through the storage contract, for corrupting a store.
func rawSet(t testing.TB, db *tipkv.DB, key, value []byte) {
	t.Helper()
	require.NoError(t, link.Write(db, func(tx *link.Tx) error { return tx.Batch.Set(key, value) }))
}

// requireDense checks that the versions of the document id are dense, from
// the oldest kept to the latest, and returns its history.
func requireDense[T any](t testing.TB, c *versioned.Collection[T], id string) []versioned.Doc[T] {
	t.Helper()
	hist := testutil.Collect(t, c.History(id, tipkv.Query{}))
	if len(hist) > 0 {
		require.Equal(t, testutil.Range(hist[0].Version, hist[len(hist)-1].Version), versionsOf(hist), "versions of %q are dense", id)
	}
	n, err := c.Count(id)
	require.NoError(t, err)
	require.Equal(t, int64(len(hist)), n, "Count(%q)", id)
	return hist
}

// requireNoMarkerAfterMarker checks that no delete marker follows another
// (a Delete of a deleted document writes nothing) and returns how many
// markers hist holds.
func requireNoMarkerAfterMarker[T any](t testing.TB, hist []versioned.Doc[T]) int {
	t.Helper()
	markers := 0
	for i, d := range hist {
		if d.Deleted {
			markers++
			if i+1 < len(hist) {
				require.False(t, hist[i+1].Deleted, "marker %d follows marker %d", d.Version, hist[i+1].Version)
			}
		}
	}
	return markers
}
