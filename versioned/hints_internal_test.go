package versioned

import (
	"fmt"
	"hash/maphash"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
)

// Between the moment a Tx's batch is applied and the moment the Tx
// releases its documents, the version cache's entry still holds the old
// latest version: Latest must not answer from it (see hints), but read the
// store, which already shows the new one. A hook registered before the
// Put runs in that window.
func TestLatestBetweenApplyAndRelease(t *testing.T) {
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	c, err := NewCollection(db, "docs", &Options[string]{Codec: codec.String{}})
	require.NoError(t, err)
	for range 3 {
		_, err := c.Put(db, "a", "old")
		require.NoError(t, err)
	}
	d, err := c.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(3), d.Version)
	_, _, found, ok := c.w.cache.hints.lookup(c.docPrefix(nil, "a"))
	require.True(t, found && ok, "version 3 is published")

	var inWindow Doc[string]
	var windowErr error
	require.NoError(t, db.Update(func(b *tipkv.Batch) error {
		if err := link.Write(b, func(tx *link.Tx) error {
			tx.OnApplied(func() { inWindow, windowErr = c.Latest("a") })
			return nil
		}); err != nil {
			return err
		}
		_, err := c.Put(b, "a", "new")
		return err
	}))
	require.NoError(t, windowErr)
	require.Equal(t, int64(4), inWindow.Version, "Latest after the batch applied")
	require.Equal(t, "new", inWindow.Value)
	d, err = c.Latest("a")
	require.NoError(t, err)
	require.Equal(t, int64(4), d.Version)
}

// A slot holds a key of up to hintKeyMax bytes; a lookup finds it only by
// that exact key (not a key one byte longer with a zero, nor one that
// differs in its last byte), and finds it unknown while a Tx would hold
// it. A longer key goes through the table of entries, made at the first.
func TestHintSlots(t *testing.T) {
	h := &hints{seed: maphash.MakeSeed()}
	h.size(64)
	for n := 1; n <= hintKeyMax+9; n++ {
		key := make([]byte, n)
		for i := range key {
			key[i] = byte(i*7 + n)
		}
		if n%3 == 0 {
			key[n-1] = 0 // a trailing zero, as the zero padding
		}
		e := &docEntry{key: string(key), state: docState{latest: int64(n), latestKnown: true, deleted: n%2 == 0}}
		h.publish(e)
		latest, deleted, found, ok := h.lookup(key)
		require.True(t, found && ok, "length %d", n)
		require.Equal(t, int64(n), latest)
		require.Equal(t, n%2 == 0, deleted)
		if n <= hintKeyMax {
			require.Nil(t, h.long.Load(), "no table of entries before a long key")
		} else {
			require.NotNil(t, h.long.Load())
		}

		other := slices.Clone(key)
		other[n-1]++
		_, _, found, _ = h.lookup(other)
		require.False(t, found, "length %d: another key", n)
		_, _, found, _ = h.lookup(append(slices.Clone(key), 0))
		require.False(t, found, "length %d: a longer key", n)

		h.unpublish(e) // a Tx takes the lock
		_, _, found, ok = h.lookup(key)
		require.True(t, found, "length %d", n)
		require.False(t, ok, "length %d: unknown while held", n)
		e.state.latest++
		h.publish(e)
		latest, _, _, ok = h.lookup(key)
		require.True(t, ok)
		require.Equal(t, int64(n+1), latest)

		h.retire(e)
		_, _, found, _ = h.lookup(key)
		require.False(t, found, "length %d: retired", n)
	}
}

// A slot another key took back is left alone when the first key's entry
// is locked or retired.
func TestHintSlotTakenByAnotherKey(t *testing.T) {
	h := &hints{seed: maphash.MakeSeed()}
	h.size(64)
	slots := *h.slots.Load()
	a := &docEntry{key: "a", state: docState{latest: 3, latestKnown: true}}
	var b *docEntry
	for i := 0; b == nil; i++ {
		k := fmt.Sprint("b", i)
		if h.index(k, len(slots)) == h.index(a.key, len(slots)) {
			b = &docEntry{key: k, state: docState{latest: 7, latestKnown: true}}
		}
	}
	h.publish(a)
	h.publish(b)
	_, _, found, _ := h.lookup([]byte(a.key))
	require.False(t, found, "b took the slot")
	h.adopt(a) // a read of a under the mutex does not take b's slot
	h.unpublish(a)
	h.retire(a)
	latest, _, found, ok := h.lookup([]byte(b.key))
	require.True(t, found && ok)
	require.Equal(t, int64(7), latest)
}

// The hints table starts small and doubles as the version cache fills
// (hintSlotsPerEntry slots an entry), up to the cache's capacity; a
// document published before the table grew is put back in its slot, if
// free, by the first Latest that finds it under the mutex.
func TestHintsTableGrowsWithTheCache(t *testing.T) {
	defer knobs.Set(&knobs.Versioned.CacheEntries, 20_000)()
	db, err := tipkv.Open("", &tipkv.Options{InMemory: true, NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	c, err := NewCollection(db, "docs", &Options[string]{Codec: codec.String{}})
	require.NoError(t, err)
	h := c.w.cache.hints
	slots := func() int { return len(*h.slots.Load()) }
	require.Equal(t, 64, slots(), "a DB that remembers nothing yet")

	for i := range 1000 {
		_, err := c.Put(db, fmt.Sprint("doc-", i), "v")
		require.NoError(t, err)
	}
	require.Equal(t, 8192, slots(), "8 slots for each of 1,000 entries, rounded up")
	readmitted := 0
	for i := range 1000 {
		prefix := c.docPrefix(nil, fmt.Sprint("doc-", i))
		s := &(*h.slots.Load())[h.index(string(prefix), slots())]
		if _, _, found, _ := h.lookup(prefix); found || s.seq.Load()>>1&0x7f != 0 {
			continue // published in this table, or its slot is taken
		}
		d, err := c.Latest(fmt.Sprint("doc-", i))
		require.NoError(t, err)
		require.Equal(t, int64(1), d.Version)
		latest, _, found, ok := h.lookup(prefix)
		require.True(t, found && ok, "doc-%d back in its slot", i)
		require.Equal(t, int64(1), latest)
		readmitted++
	}
	require.Positive(t, readmitted, "documents published in a smaller table")

	for i := 1000; i < 10_000; i++ {
		_, err := c.Put(db, fmt.Sprint("doc-", i), "v")
		require.NoError(t, err)
	}
	require.Equal(t, 32768, slots(), "no more than the cache holds (20,000, rounded up)")
}
