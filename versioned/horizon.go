package versioned

import (
	"errors"
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/link"
)

// The purge horizon of a collection: reads by time stay honest after
// whole documents were dropped.
//
// A document dropped whole (Purge, or PurgeExpired) leaves no version to
// tell from, and its version numbers start again at 1, so the search by
// time alone would answer ErrNotFound for a time at which the document
// existed. Every whole drop therefore raises the collection's horizon to
// the time from which the document was gone, the time a new version
// would have had (its purge's commit time, and past its latest version's
// time: see docState.commitTime). A read by time that finds no version at
// a time before the horizon could have been answered by a dropped
// document: it is ErrPruned, with the horizon as the oldest time still
// answerable, and so is LatestAllAsOf at such a time and ChangedBetween
// from one.
//
// The horizon is one per collection, not per document (a key per purged
// id would grow with the ids a collection with a time to live ever held),
// so it is conservative: a document never purged, asked for at a time
// before its first version and before the horizon, is ErrPruned too.
//
// It is stored as keys 0B | collection | desc(time), newest first: the
// horizon is the first key, one seek. A drop that raises it writes its
// time and deletes the newest key it read, in its own batch, without a
// condition: two drops racing each leave their key, and the first key is
// still the greatest, so no condition, and no lock, is needed on any
// engine. Keys left by such races are deleted by later drops only when
// they are the newest; at most one per race remains.

// horizonPrefix is the prefix of the collection's horizon keys.
func (c *Collection[T]) horizonPrefix() []byte {
	return codec.AppendString(codec.AppendFamily(nil, codec.FamilyPurges), c.name)
}

// horizon returns the collection's purge horizon as r sees it, in Unix
// ns; 0 when no document was ever dropped whole.
func (c *Collection[T]) horizon(r engine.Reader) (int64, error) {
	h, err := newestNumber(r, c.horizonPrefix())
	if err != nil {
		return 0, fmt.Errorf("collection %q: purge horizon: %w", c.name, err)
	}
	return h, nil
}

// raiseHorizon makes tx raise the collection's horizon to the time from
// which the document d held, about to be dropped whole, is gone: the
// commit time its next version would have, read from its latest version
// when the Tx does not know it.
func (c *Collection[T]) raiseHorizon(tx *link.Tx, d *docState, prefix []byte) error {
	if d.latest > 0 && d.ltime == 0 {
		raw, err := c.store.Get(numberKey(prefix, d.latest))
		switch {
		case errors.Is(err, engine.ErrNotFound):
			// Gone already: on a shared engine the Tx's guard fails.
		case err != nil:
			return err
		default:
			d.ltime = docfmt.Rules{}.Parse(raw).Time
		}
	}
	h := d.commitTime(tx)
	p := c.horizonPrefix()
	cur, err := newestNumber(c.store, p)
	if err != nil {
		return err
	}
	if cur >= h {
		return nil
	}
	if cur > 0 {
		if err := tx.Batch.Delete(numberKey(p, cur)); err != nil {
			return err
		}
	}
	return tx.Batch.Set(numberKey(p, h), nil)
}

// prunedBefore returns the error of a read by time at asked (t in Unix
// ns) that found no version, when t is before the horizon h: the version
// may have been dropped with its whole document. nil otherwise.
func (c *Collection[T]) prunedBefore(where string, asked time.Time, t, h int64) error {
	if t >= h {
		return nil
	}
	return &tipkv.PrunedError{Where: where, Asked: asked, Oldest: timeOf(h)}
}
