package tipkv_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// Keys tipkv did not write, inside the ranges its reads cover: reads
// report ErrCorrupt naming the key, or skip what cannot be theirs; they never
// panic or return garbage as data.
func TestForeignKeys(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true})
	require.NoError(t, err)
	defer db.Close()
	docs, err := versioned.NewCollection[string](db, "docs", nil)
	require.NoError(t, err)
	_, err = docs.Put(db, "a", "one")
	require.NoError(t, err)

	docPrefix := codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "docs"), "a")
	foreign := map[string][]byte{
		"short number":  append(append([]byte{}, docPrefix...), 0x7f, 0xff),
		"long number":   codec.AppendDesc(append(append([]byte{}, docPrefix...), 0x01), 5),
		"bad escape":    append(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "docs"), 'b', 0x00, 0x07),
		"no terminator": append(codec.AppendString(codec.AppendFamily(nil, codec.FamilyVersions), "docs"), 'z'),
	}
	for name, key := range foreign {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, put(db, string(key), "\xc1garbage"))
			require.NotPanics(t, func() {
				d, err := docs.Latest("a")
				if err == nil {
					require.Equal(t, "one", d.Value, "a foreign key must not read as data")
				} else {
					require.ErrorIs(t, err, tipkv.ErrCorrupt)
				}
				for d, err := range docs.History("a", tipkv.Query{}) {
					if err != nil {
						require.ErrorIs(t, err, tipkv.ErrCorrupt)
						require.ErrorContains(t, err, "docs")
						break
					}
					require.Equal(t, "one", d.Value)
				}
				for d, err := range docs.LatestAll(tipkv.Query{}) {
					if err != nil {
						require.ErrorIs(t, err, tipkv.ErrCorrupt)
						break
					}
					require.Equal(t, "one", d.Value)
				}
			})
			require.NoError(t, db.Update(func(b *tipkv.Batch) error { return del(b, string(key)) }))
		})
	}

	// A foreign key among a queue's items.
	q, err := queue.Open[string](db, "jobs", nil)
	require.NoError(t, err)
	_, err = q.Enqueue(db, "x")
	require.NoError(t, err)
	qprefix := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), "jobs")
	require.NoError(t, put(db, string(append(qprefix, 0x80, 0x01)), "junk"))
	require.NotPanics(t, func() {
		msgs, err := q.Receive(10, time.Minute)
		if err != nil {
			require.ErrorIs(t, err, tipkv.ErrCorrupt)
		}
		for _, m := range msgs {
			require.Equal(t, "x", m.Value)
		}
	})
}
