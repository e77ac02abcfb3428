package tipkv_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
	"github.com/tipkv/tipkv/internal/storage"
	"github.com/tipkv/tipkv/internal/storage/pebblestore"
	"github.com/tipkv/tipkv/queue"
	"github.com/tipkv/tipkv/versioned"
)

// The storage contract lets a batch keep the slices it is given until it
// is closed (etcd's batch would send them as they are at Apply). keptStore
// is Pebble behind batches that check, at Apply, that every key and value
// given to Set still holds what it held then.
type keptStore struct{ storage.Store }

func (s keptStore) NewBatch() storage.Batch { return &keptBatch{Batch: s.Store.NewBatch()} }

type keptBatch struct {
	storage.Batch
	given [][2][]byte // the slices given
	held  [][2][]byte // copies of what they held
}

func (b *keptBatch) Set(k, v []byte) error {
	b.given = append(b.given, [2][]byte{k, v})
	b.held = append(b.held, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
	return b.Batch.Set(k, v)
}

func (b *keptBatch) Apply(sync bool) error {
	for i, g := range b.given {
		if !bytes.Equal(g[0], b.held[i][0]) || !bytes.Equal(g[1], b.held[i][1]) {
			return fmt.Errorf("Set %d of the batch: its key or value changed before Apply: key %x was %x", i, g[0], b.held[i][0])
		}
	}
	return b.Batch.Apply(sync)
}

// Enqueues and Puts leave the slices they give a batch alone until it is
// applied, alone and inside an Update.
func TestBatchSlicesKept(t *testing.T) {
	ps, err := pebblestore.Open("kept", pebblestore.Config{InMemory: true, FormatVersion: tipkv.FormatVersion})
	require.NoError(t, err)
	d, err := link.NewDB(keptStore{ps}, "kept", nil)
	require.NoError(t, err)
	db := d.(*tipkv.DB)
	defer db.Close()
	q, err := queue.Open[string](db, "q", nil)
	require.NoError(t, err)
	docs, err := versioned.NewCollection[string](db, "docs", nil)
	require.NoError(t, err)

	require.NoError(t, q.Enqueue(db, "a", "b", "c"), "several items in one Enqueue")
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		if err := q.Enqueue(b, "d"); err != nil {
			return err
		}
		return q.Enqueue(b, "e")
	}), "two Enqueues in one Update")
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		if _, err := docs.Put(b, "x", "1"); err != nil {
			return err
		}
		_, err := docs.Put(b, "y", "2")
		return err
	}), "two Puts in one Update")
}
