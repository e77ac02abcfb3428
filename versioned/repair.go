package versioned

import (
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/tipkv/tipkv"
)

// Repairs: one call each for what a user does after a bad write, with its
// provenance recorded in the version it writes (metadata, see
// tipkv.Metadata). Each writes a new version: history is never rewritten.

// RevertHeader is the metadata header a version written by Revert or
// Undelete carries: the version whose value it restored.
const RevertHeader = "tipkv-restores"

// Revert writes the value of version v of the document id as its next
// version, and returns that version. The new version carries m, with
// RevertHeader set to v and, when m has no Reason, the Reason "revert to
// version v". Version v must be kept and not a delete marker
// (ErrNotFound otherwise); the write is conditional on the latest version
// read when Revert began, so a write that came between fails it with
// ErrConflict rather than be undone unseen. w is the DB or a Batch, as for
// Put; Revert reads the store as committed, not a Batch's own writes.
func (c *Collection[T]) Revert(w tipkv.Writer, id string, v int64, m tipkv.Metadata) (int64, error) {
	old, err := c.Get(id, v)
	if err != nil {
		return 0, fmt.Errorf("revert: %w", err)
	}
	latest, err := c.latestVersion(id)
	if err != nil {
		return 0, err
	}
	return c.PutIf(tipkv.WithMetadata(w, restored(m, v, fmt.Sprintf("revert to version %d", v))), id, old.Value, latest)
}

// Undelete writes, after the delete marker that is the latest version of
// the document id, the value of the version before the marker, and
// returns the version written. It carries m, with RevertHeader set to the
// version restored and, when m has no Reason, the Reason "undelete". It
// fails with ErrConflict when the latest version is not a delete marker
// (nothing to undelete, or a write came between), and with ErrNotFound
// when the version before the marker was dropped or is a marker too.
func (c *Collection[T]) Undelete(w tipkv.Writer, id string, m tipkv.Metadata) (int64, error) {
	latest, err := c.latestVersion(id)
	if err != nil {
		return 0, err
	}
	var nf *notFoundError
	if _, err := c.Latest(id); !errors.As(err, &nf) || nf.kind != deletedDoc {
		return 0, fmt.Errorf("%w: %s: the latest version %d is no delete marker", tipkv.ErrConflict, c.where(id), latest)
	}
	old, err := c.Get(id, latest-1)
	if err != nil {
		return 0, fmt.Errorf("undelete: %w", err)
	}
	return c.PutIf(tipkv.WithMetadata(w, restored(m, latest-1, "undelete")), id, old.Value, latest)
}

// latestVersion returns the latest version of id, a delete marker
// included: ErrNotFound for none.
func (c *Collection[T]) latestVersion(id string) (int64, error) {
	page, _, err := c.HistoryPage(id, tipkv.Query{Limit: 1})
	if err != nil {
		return 0, err
	}
	if len(page) == 0 {
		return 0, &notFoundError{coll: c.name, id: id, kind: missingDoc}
	}
	return page[0].Version, nil
}

// restored returns m with RevertHeader set to v and reason as its Reason
// when it has none.
func restored(m tipkv.Metadata, v int64, reason string) tipkv.Metadata {
	h := maps.Clone(m.Headers)
	if h == nil {
		h = map[string]string{}
	}
	h[RevertHeader] = strconv.FormatInt(v, 10)
	m.Headers = h
	if m.Reason == "" {
		m.Reason = reason
	}
	return m
}
