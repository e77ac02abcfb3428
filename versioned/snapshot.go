package versioned

import (
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// CollectionView reads a collection in a snapshot (tipkv.DB.View): every
// read through one view, or through views on one snapshot, sees the store
// as it was when the snapshot was taken, whatever commits meanwhile. It has
// the read methods of Collection, with the same meaning and cost.
//
// A CollectionView is valid while its snapshot is (inside the function
// passed to View); a read after that fails with ErrInvalid. It is safe for
// concurrent use, as the snapshot is.
type CollectionView[T any] struct {
	c    *Collection[T]
	snap *tipkv.Snapshot
}

// In returns a view of the collection in snapshot s, which must be a
// snapshot of the collection's DB:
//
//	err := db.View(func(s *tipkv.Snapshot) error {
//		doc, err := users.In(s).Latest("ada")
//		...
//		n, err := users.In(s).Count("ada") // the same store as Latest saw
//	})
//
// A nil snapshot, one of another DB, or one used after its View returned
// makes every read of the view fail with ErrInvalid.
func (c *Collection[T]) In(s *tipkv.Snapshot) CollectionView[T] {
	return CollectionView[T]{c: c, snap: s}
}

// readerIn returns the reader of snapshot s, which must belong to db.
func readerIn(db *tipkv.DB, s *tipkv.Snapshot) (engine.Reader, error) {
	owner, r, err := link.ReaderOf(s)
	if err != nil {
		return nil, err
	}
	if ln, _ := link.Of(db); owner != ln {
		return nil, fmt.Errorf("%w: the snapshot belongs to another DB", tipkv.ErrInvalid)
	}
	return r, nil
}

// Latest is Collection.Latest in the snapshot.
func (v CollectionView[T]) Latest(id string) (Doc[T], error) {
	r, err := readerIn(v.c.db, v.snap)
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s: %w", v.c.where(id), err)
	}
	return v.c.seek(r, id, 0)
}

// AsOf is Collection.AsOf in the snapshot.
func (v CollectionView[T]) AsOf(id string, version int64) (Doc[T], error) {
	r, err := readerIn(v.c.db, v.snap)
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s: %w", v.c.where(id), err)
	}
	return v.c.asOf(r, id, version)
}

// Get is Collection.Get in the snapshot.
func (v CollectionView[T]) Get(id string, version int64) (Doc[T], error) {
	r, err := readerIn(v.c.db, v.snap)
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s: %w", v.c.where(id), err)
	}
	return v.c.get(r, id, version)
}

// History is Collection.History in the snapshot.
func (v CollectionView[T]) History(id string, q tipkv.Query) iter.Seq2[Doc[T], error] {
	return lazy(v.c.db, v.snap, func(err error) error { return fmt.Errorf("history of %s: %w", v.c.where(id), err) },
		func(r engine.Reader) iter.Seq2[Doc[T], error] { return v.c.historyOf(r, id, q) })
}

// HistoryPage is Collection.HistoryPage in the snapshot.
func (v CollectionView[T]) HistoryPage(id string, q tipkv.Query) ([]Doc[T], tipkv.Cursor, error) {
	r, err := readerIn(v.c.db, v.snap)
	if err != nil {
		return nil, "", fmt.Errorf("history of %s: %w", v.c.where(id), err)
	}
	return v.c.historyPage(r, id, q)
}

// LatestAll is Collection.LatestAll in the snapshot.
func (v CollectionView[T]) LatestAll(q tipkv.Query) iter.Seq2[Doc[T], error] {
	return lazy(v.c.db, v.snap, func(err error) error { return fmt.Errorf("LatestAll of collection %q: %w", v.c.name, err) },
		func(r engine.Reader) iter.Seq2[Doc[T], error] { return v.c.latestAllOf(r, q) })
}

// Count is Collection.Count in the snapshot.
func (v CollectionView[T]) Count(id string) (int64, error) {
	r, err := readerIn(v.c.db, v.snap)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", v.c.where(id), err)
	}
	return v.c.count(r, id)
}

// LatestMany is Collection.LatestMany in the snapshot.
func (v CollectionView[T]) LatestMany(ids ...string) ([]Doc[T], error) {
	r, err := readerIn(v.c.db, v.snap)
	if err != nil {
		return nil, fmt.Errorf("collection %q: %w", v.c.name, err)
	}
	return v.c.latestMany(r, ids)
}

// FeedView reads the streams of a Feed in a snapshot (tipkv.DB.View), as
// CollectionView reads a collection: every read sees the store as it was
// when the snapshot was taken. It is valid while its snapshot is, and safe
// for concurrent use.
type FeedView[T any] struct {
	f    *Feed[T]
	snap *tipkv.Snapshot
}

// In returns a view of the feed in snapshot s, which must be a snapshot of
// the feed's DB. A nil snapshot, one of another DB, or one used after its
// View returned makes every read of the view fail with ErrInvalid.
func (f *Feed[T]) In(s *tipkv.Snapshot) FeedView[T] { return FeedView[T]{f: f, snap: s} }

// Newest is Feed.Newest in the snapshot.
func (v FeedView[T]) Newest(stream string, q tipkv.Query) iter.Seq2[Event[T], error] {
	return lazy(v.f.db, v.snap, func(err error) error { return fmt.Errorf("stream %q: %w", stream, err) },
		func(r engine.Reader) iter.Seq2[Event[T], error] { return v.f.read(r, stream, q, 0, math.MaxInt64) })
}

// Between is Feed.Between in the snapshot.
func (v FeedView[T]) Between(stream string, from, to time.Time, q tipkv.Query) iter.Seq2[Event[T], error] {
	return lazy(v.f.db, v.snap, func(err error) error { return fmt.Errorf("stream %q: %w", stream, err) },
		func(r engine.Reader) iter.Seq2[Event[T], error] { return v.f.between(r, stream, from, to, q) })
}

// lazy is the read seq opens on the reader of snapshot s, taken when the
// read starts (not when it is made), or the reader's error, wrapped by
// where, yielded alone.
func lazy[V any](db *tipkv.DB, s *tipkv.Snapshot, where func(error) error, seq func(engine.Reader) iter.Seq2[V, error]) iter.Seq2[V, error] {
	return func(yield func(V, error) bool) {
		r, err := readerIn(db, s)
		if err != nil {
			var zero V
			yield(zero, where(err))
			return
		}
		seq(r)(yield)
	}
}

// AsOfTime is Collection.AsOfTime in the snapshot.
func (v CollectionView[T]) AsOfTime(id string, t time.Time) (Doc[T], error) {
	r, err := readerIn(v.c.db, v.snap)
	if err != nil {
		return Doc[T]{}, fmt.Errorf("%s: %w", v.c.where(id), err)
	}
	return v.c.asOfTime(r, id, t)
}

// HistoryBetween is Collection.HistoryBetween in the snapshot.
func (v CollectionView[T]) HistoryBetween(id string, from, to time.Time, q tipkv.Query) iter.Seq2[Doc[T], error] {
	return lazy(v.c.db, v.snap, func(err error) error { return fmt.Errorf("history of %s: %w", v.c.where(id), err) },
		func(r engine.Reader) iter.Seq2[Doc[T], error] { return v.c.historyBetween(r, id, from, to, q) })
}

// LatestAllAsOf is Collection.LatestAllAsOf in the snapshot.
func (v CollectionView[T]) LatestAllAsOf(t time.Time, q tipkv.Query) iter.Seq2[Doc[T], error] {
	return lazy(v.c.db, v.snap, func(err error) error { return fmt.Errorf("LatestAllAsOf of collection %q: %w", v.c.name, err) },
		func(r engine.Reader) iter.Seq2[Doc[T], error] { return v.c.latestAllAsOf(r, t, q) })
}

// ChangedBetween is Collection.ChangedBetween in the snapshot.
func (v CollectionView[T]) ChangedBetween(from, to time.Time, q tipkv.Query) iter.Seq2[TimeChange[T], error] {
	return lazy(v.c.db, v.snap, func(err error) error { return fmt.Errorf("ChangedBetween of collection %q: %w", v.c.name, err) },
		func(r engine.Reader) iter.Seq2[TimeChange[T], error] { return v.c.changedBetween(r, from, to, q) })
}
