package cli

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

// foreignStore holds keys tipkv did not write and values that are not
// msgpack.
func foreignStore(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		set(t, db,
			[]byte{0x0e, 'x'}, []byte{0xde, 0xad},
			[]byte{0x01, 'c', 0x00}, []byte("v"), // a segment without terminator
			vkey("c", "d", 1), []byte("not msgpack"),
			vkey("c", "\xff", 1), mp(t, []byte{1, 2, 3}),
		)
	})
}

// prefixStore has names that begin with "orders" in every family, and a
// document whose id is "orders".
func prefixStore(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		enq := t0.UnixNano()
		set(t, db,
			vkey("orders", "o-1", 1), mp(t, 1),
			fkey("orders-audit", 5), mp(t, "placed"),
			qkey(codec.FamilyQueueItems, "orders-out", 1), qvalue(t, queueItemTag, 0, enq, 0, "o-1"),
			segPrefix(codec.FamilyQueueState, "orders-out"), qstate(1, 2),
			qkey(codec.FamilyDeadLetters, "orders-out", 0), qvalue(t, queueDeadTag, 3, enq, enq, "o-0"),
			vkey("other", "orders", 1), mp(t, 2),
		)
	})
}

// problemStore breaks every invariant check knows, once each.
func problemStore(t *testing.T) string {
	enq := t0.UnixNano()
	return writeStore(t, func(db *tipkv.DB) {
		set(t, db,
			vkey("c", "gap", 5), mp(t, 5), // 4 and 3 missing
			vkey("c", "gap", 2), mp(t, 2),
			vkey("c", "gap", 1), mp(t, 1),
			vkey("c", "zero", 0), mp(t, 0),
			vkey("c", "text", 1), []byte("plain text"),
			vkey("raw", "r", 1), []byte("plain text"),
			fkey("s", 1), []byte{0xc1},
			[]byte{0x01, 'c', 0x00}, []byte("v"),
			[]byte{0x0e}, []byte("x"),
			qkey(codec.FamilyQueueItems, "q", 1), qvalue(t, queueItemTag, 0, enq, 0, "below head"),
			qkey(codec.FamilyQueueItems, "q", 4), []byte{0x09, 0x00},
			segPrefix(codec.FamilyQueueState, "q"), qstate(3, 5),
			segPrefix(codec.FamilyQueueState, "bad"), []byte{0x01, 0x80},
			segPrefix(codec.FamilyQueueState, "back"), qstate(7, 6),
			qkey(codec.FamilyQueueItems, "q", 6), qvalue(t, queueItemTag, 0, enq, 0, "twice"),
			qkey(codec.FamilyDeadLetters, "q", 6), qvalue(t, queueDeadTag, 3, enq, enq, "twice"),
			qkey(codec.FamilyDeadLetters, "q", 2), append([]byte{queueDeadRawTag}, 0x09, 0x00),
		)
	})
}

// prunedStore holds a document pruned below version 7: healthy.
func prunedStore(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		set(t, db, vkey("c", "d", 7), mp(t, 7), vkey("c", "d", 8), mp(t, 8))
	})
}

// noFormatKeyStore has lost its format key: the store's marker says it
// was created, so it does not open.
func noFormatKeyStore(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		s, err := linkStore(db)
		require.NoError(t, err)
		b := s.NewBatch()
		require.NoError(t, b.Delete(segPrefix(codec.FamilyMeta, "format")))
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
	})
}

// deleteMarkerStore holds two deleted documents, one written again.
func deleteMarkerStore(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		c, err := versioned.NewCollection[string](db, "pages", nil)
		require.NoError(t, err)
		for _, s := range []string{"a", "b"} {
			_, err := c.Put(db, "home", s)
			require.NoError(t, err)
		}
		_, err = c.Delete(db, "home")
		require.NoError(t, err)
		_, err = c.Put(db, "about", "x")
		require.NoError(t, err)
		_, err = c.Delete(db, "about")
		require.NoError(t, err)
		_, err = c.Put(db, "about", "y")
		require.NoError(t, err)
	})
}

// jsonValueStore holds values stored as JSON (codec.JSON) beside msgpack.
func jsonValueStore(t *testing.T) string {
	type page struct {
		Title string `json:"title"`
		Body  string `json:"body"`
	}
	jsonValue, err := codec.JSON[page]{}.Append(nil, page{"Home", "<p>hi</p>"})
	require.NoError(t, err)
	return writeStore(t, func(db *tipkv.DB) {
		set(t, db,
			vkey("pages", "home", 1), jsonValue,
			vkey("pages", "home", 2), []byte(`[1, 2, {"a": null}]`),
			fkey("log", 1), []byte(`"started"`),
			vkey("users", "ada", 1), mp(t, page{"Ada", "x"}),
		)
	})
}

// tombstoneStore holds a point and a range tombstone in an sstable.
func tombstoneStore(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		for v := int64(1); v <= 20; v++ {
			set(t, db, vkey("c", "d", v), mp(t, v))
		}
		s, err := linkStore(db)
		require.NoError(t, err)
		b := s.NewBatch()
		require.NoError(t, b.Delete(vkey("c", "d", 1)))
		require.NoError(t, b.DeleteRange(vkey("c", "d", 10), vkey("c", "d", 2)))
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
		require.NoError(t, db.Flush())
	})
}

// brokenQueueStore holds a queue whose state key is corrupt.
func brokenQueueStore(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		set(t, db, segPrefix(codec.FamilyQueueState, "bad"), []byte{0x01, 0x80})
	})
}

// compactStore holds 200 versions at the bottom level and a range
// tombstone over 189 of them in a newer table.
func compactStore(t *testing.T) string {
	return writeStore(t, func(db *tipkv.DB) {
		for v := int64(1); v <= 200; v++ {
			set(t, db, vkey("c", "d", v), mp(t, strings.Repeat("x", 100)))
		}
		require.NoError(t, db.Compact()) // the versions go to the bottom level
		s, err := linkStore(db)
		require.NoError(t, err)
		b := s.NewBatch()
		require.NoError(t, b.DeleteRange(vkey("c", "d", 190), vkey("c", "d", 0)))
		require.NoError(t, b.Apply(false))
		require.NoError(t, b.Close())
		require.NoError(t, db.Flush())
	})
}

// ttlStore holds documents with a time to live of an hour: "gone" written
// at t0, expired by goldenNow; "live" written at t0 and again at
// goldenWritten, whose version 2 expires after goldenNow.
func ttlStore(t *testing.T) string {
	now := t0
	return writeStoreAt(t, func() time.Time { return now }, func(db *tipkv.DB) {
		c, err := versioned.NewCollection[string](db, "sessions", &versioned.Options[string]{TTL: time.Hour, PurgeInterval: -1})
		require.NoError(t, err)
		for _, id := range []string{"gone", "live"} {
			_, err := c.Put(db, id, id+" at "+now.Format(time.Kitchen))
			require.NoError(t, err)
		}
		now = goldenWritten
		_, err = c.Put(db, "live", "live at "+now.Format(time.Kitchen))
		require.NoError(t, err)
	})
}

// groupsStore holds two streams with consumer groups: on "orders", one
// caught up, one an event behind and one far behind, at one-minute
// events; on "audit", one group with nothing pending.
func groupsStore(t *testing.T) string {
	now := t0
	return writeStoreAt(t, func() time.Time { return now }, func(db *tipkv.DB) {
		f, err := versioned.NewFeed[string](db, nil)
		require.NoError(t, err)
		var ps []int64
		for i := range 6 {
			now = t0.Add(time.Duration(i) * time.Minute)
			p, err := f.Append(db, "orders", "order "+strconv.Itoa(i))
			require.NoError(t, err)
			ps = append(ps, p)
		}
		require.NoError(t, f.Advance(db, "orders", "shipping", 0, ps[5]))
		require.NoError(t, f.Advance(db, "orders", "billing", 0, ps[4]))
		require.NoError(t, f.Advance(db, "orders", "reports", 0, ps[0]))
		p, err := f.Append(db, "audit", "login")
		require.NoError(t, err)
		require.NoError(t, f.Advance(db, "audit", "archive", 0, p))
	})
}
