package versioned

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/link"
)

// PurgeStats says what one pass of PurgeExpired did.
type PurgeStats struct {
	Documents int   // documents visited
	Purged    int   // documents purged: their latest version had expired
	Versions  int64 // versions those purges dropped
}

// PurgeExpired purges every document of the collection whose latest
// version has expired (Options.TTL): it visits the documents with one
// seek each and drops the whole history of each expired one in an Update
// of its own, which holds the document and reads its latest stored version
// again: it purges only if that version has expired by then. A document
// written again since the visit is kept, even one purged meanwhile (by
// another pass, here or in another process) and written again under the
// version number it had. On a shared engine the purge commits on the
// condition that the latest version is still the expired value it read.
// It works on any collection, whatever this handle's TTL: the expiry is in
// each version.
//
// It stops early with ctx's error, and returns ErrClosed once the DB has
// closed. A handle with a TTL calls it in the background every
// Options.PurgeInterval.
func (c *Collection[T]) PurgeExpired(ctx context.Context) (st PurgeStats, err error) {
	defer func() {
		countPass(&c.w.dbm.purgePasses, &c.w.dbm.purgeFailures, err)
		c.w.dbm.purgedDoc.Add(uint64(st.Purged))
	}()
	if c.w.isClosed() {
		return st, tipkv.ErrClosed
	}
	var expired []string
	now := c.clock().UnixNano()
	err = walkPrefixes(c.store, c.prefix, codec.PrefixEnd(c.prefix), retainPage, func(it engine.Iter) error {
		st.Documents++
		raw, err := it.Value()
		if err != nil || !docfmt.Expired(raw, now) {
			return err
		}
		k := it.Key()
		id, _, err := decodeDocTail(k[len(c.prefix):])
		if err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		expired = append(expired, id)
		return nil
	}, func() error {
		// The page's iterator is closed: purge its expired documents.
		for _, id := range expired {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := c.prune(c.db, id, c.expiredCut)
			if err != nil {
				return err
			}
			if n > 0 {
				st.Purged++
				st.Versions += n
			}
		}
		expired, now = expired[:0], c.clock().UnixNano()
		return nil
	})
	if err != nil && !errors.Is(err, ctx.Err()) && !errors.Is(err, tipkv.ErrClosed) {
		err = fmt.Errorf("purging expired documents of %q: %w", c.name, err)
	}
	if err == nil {
		err = ctx.Err()
	}
	return st, err
}

// expiredCut is the cut of PurgeExpired: the whole history if the latest
// version stored has expired by now, none otherwise. The visit that found
// the document expired proves nothing by the time the document is held: it
// may have been purged and written again since, and a purge restarts the
// version numbers, so the stored value is read again here. On a shared
// engine latest may be a hint: a value that is not stored under it means
// another process wrote (the Update runs again, reading the store), and
// the purge requires the value it read (the Tx's guard pins the latest
// version number, not what it holds).
func (c *Collection[T]) expiredCut(tx *link.Tx, prefix []byte, latest int64) (int64, error) {
	key := numberKey(prefix, latest)
	raw, err := c.store.Get(key)
	switch {
	case errors.Is(err, engine.ErrNotFound) && c.shared:
		return 0, errStale
	case errors.Is(err, engine.ErrNotFound):
		return 0, fmt.Errorf("internal error: the latest version %d is not stored: %w", latest, err)
	case err != nil:
		return 0, err
	}
	if !docfmt.Expired(raw, c.clock().UnixNano()) {
		return 0, nil // written again: not expired any more
	}
	if c.shared {
		if err := tx.Batch.Require(engine.Equals(key, raw)); err != nil {
			return 0, err
		}
	}
	return latest, nil
}

type purgeKey struct{ collection string }

// startPurger runs PurgeExpired in the background (see background).
func (c *Collection[T]) startPurger(every time.Duration) error {
	return background(c.db, purgeKey{c.name}, every, "tipkv: purge of expired documents", func(ctx context.Context) ([]slog.Attr, error) {
		st, err := c.PurgeExpired(ctx)
		return []slog.Attr{slog.String("event", "ttl-purge"), slog.String("collection", c.name),
			slog.Int("visited", st.Documents), slog.Int("purged", st.Purged), slog.Int64("versions", st.Versions)}, err
	})
}
