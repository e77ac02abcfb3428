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
)

// PurgeStats says what one pass of PurgeExpired did.
type PurgeStats struct {
	Documents int   // documents visited
	Purged    int   // documents purged: their latest version had expired
	Versions  int64 // versions those purges dropped
}

// expiredDoc is a document a pass found expired: its id and the version
// that was latest then.
type expiredAt struct {
	id string
	v  int64
}

// PurgeExpired purges every document of the collection whose latest
// version has expired (Options.TTL): it visits the documents with one
// seek each and drops the whole history of each expired one in an Update
// of its own, on the condition that its latest version is still the
// expired one (a document written again meanwhile is kept). It works on
// any collection, whatever this handle's TTL: the expiry is in each
// version.
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
	var expired []expiredAt
	now := c.clock().UnixNano()
	err = walkPrefixes(c.store, c.prefix, codec.PrefixEnd(c.prefix), retainPage, func(it engine.Iter) error {
		st.Documents++
		raw, err := it.Value()
		if err != nil || !docfmt.Expired(raw, now) {
			return err
		}
		k := it.Key()
		id, v, err := decodeDocTail(k[len(c.prefix):])
		if err != nil {
			return fmt.Errorf("key %x: %w", k, err)
		}
		expired = append(expired, expiredAt{id: id, v: v})
		return nil
	}, func() error {
		// The page's iterator is closed: purge its expired documents.
		for _, e := range expired {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := c.prune(c.db, e.id, func(latest int64) int64 {
				if latest != e.v {
					return 0 // written again: not expired any more
				}
				return latest
			})
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

type purgeKey struct{ collection string }

// startPurger runs PurgeExpired in the background (see background).
func (c *Collection[T]) startPurger(every time.Duration) error {
	return background(c.db, purgeKey{c.name}, every, "tipkv: purge of expired documents", func(ctx context.Context) ([]slog.Attr, error) {
		st, err := c.PurgeExpired(ctx)
		return []slog.Attr{slog.String("event", "ttl-purge"), slog.String("collection", c.name),
			slog.Int("visited", st.Documents), slog.Int("purged", st.Purged), slog.Int64("versions", st.Versions)}, err
	})
}
