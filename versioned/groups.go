package versioned

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// Named cursors (consumer groups): each group of consumers of a stream
// keeps the position of the last event it handled in a key of its own,
//
//	cursor  06 | stream | group  -> asc(position), 8 bytes
//
// beside the data, so that a consumer that writes its results and moves
// its cursor in one Update handles every event exactly once, across
// crashes and restarts.

// groupKey returns the key of the cursor of group on stream.
func groupKey(stream, group string) []byte {
	return codec.AppendString(codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeedCursors), stream), group)
}

func checkGroup(stream, group string) error {
	if err := checkName("stream", stream); err != nil {
		return err
	}
	if err := checkName("group", group); err != nil {
		return fmt.Errorf("stream %q: %w", stream, err)
	}
	return nil
}

func decodeCursor(key, v []byte) (int64, error) {
	if len(v) != codec.NumberSize {
		return 0, fmt.Errorf("%w: cursor %x: want %d bytes, have %d", tipkv.ErrCorrupt, key, codec.NumberSize, len(v))
	}
	n, _, err := codec.DecodeAsc(v)
	if err == nil && n < 0 {
		err = fmt.Errorf("%w: cursor %x: position %d", tipkv.ErrCorrupt, key, n)
	}
	return n, err
}

// readCursor returns the stored cursor at key, 0 when there is none.
func readCursor(r engine.Reader, key []byte) (int64, error) {
	v, err := r.Get(key)
	if errors.Is(err, engine.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return decodeCursor(key, v)
}

// Cursor returns the position stored for group on stream: that of the
// last event the group handled, 0 when the group has none (it starts at
// the stream's beginning). It reads the store: one Get.
func (f *Feed[T]) Cursor(stream, group string) (int64, error) {
	if err := checkGroup(stream, group); err != nil {
		return 0, err
	}
	n, err := readCursor(f.store, groupKey(stream, group))
	if err != nil {
		return 0, fmt.Errorf("stream %q, group %q: %w", stream, group, err)
	}
	return n, nil
}

// Advance moves the cursor of group on stream from position from (0: the
// group has no cursor yet) to position to, as part of w: pass the Batch
// of the Update that writes what the group made of the events in
// (from, to], and either both commit or neither. If the stored cursor is
// not from (another consumer of the group moved it), Advance fails with
// ErrConflict and writes nothing, and so does the Update if it returns the
// error. to below from is ErrInvalid.
//
// A consumer that resumes with Follow(ctx, stream, cursor) and advances
// in the Update of its own writes thus applies each event once, whatever
// crashes. Consumers of one group take turns: the cursor is one position.
//
// On an exclusive engine the cursor is read once and then kept in memory;
// Advances of one group wait for each other's commit. On a shared engine
// the Update requires the stored cursor to be from at commit, reading it
// only after a failed commit or when memory says it has moved.
func (f *Feed[T]) Advance(w tipkv.Writer, stream, group string, from, to int64) error {
	if err := checkGroup(stream, group); err != nil {
		return err
	}
	if from < 0 || to < from {
		return fmt.Errorf("%w: stream %q, group %q: Advance from %d to %d", tipkv.ErrInvalid, stream, group, from, to)
	}
	return link.Write(w, func(tx *link.Tx) error { return f.advanceIn(tx, stream, group, from, to) })
}

// advanceIn is Advance on tx, its arguments checked.
func (f *Feed[T]) advanceIn(tx *link.Tx, stream, group string, from, to int64) error {
	key := groupKey(stream, group)
	d, err := f.lockCursor(tx, key)
	if err != nil {
		return fmt.Errorf("stream %q, group %q: %w", stream, group, err)
	}
	if err := f.expectCursor(tx, key, d, from); err != nil {
		return fmt.Errorf("stream %q, group %q: %w", stream, group, err)
	}
	d.latest, d.latestKnown = to, true
	return tx.Batch.Set(key, codec.AppendAsc(nil, to))
}

// DropGroup deletes the cursor of group on stream, as part of w: the
// group no longer holds back Trim.
func (f *Feed[T]) DropGroup(w tipkv.Writer, stream, group string) error {
	if err := checkGroup(stream, group); err != nil {
		return err
	}
	key := groupKey(stream, group)
	return link.Write(w, func(tx *link.Tx) error {
		d, err := f.lockCursor(tx, key)
		if err != nil {
			return fmt.Errorf("stream %q, group %q: %w", stream, group, err)
		}
		d.latest, d.latestKnown, d.sh.guarded = 0, true, true
		return deletePoint(tx, key)
	})
}

// lockCursor takes the writer's lock of the cursor key for the Tx, and
// returns the Tx's view of it: latest is the cursor when latestKnown.
func (f *Feed[T]) lockCursor(tx *link.Tx, key []byte) (*docState, error) {
	t, err := f.w.txOf(tx)
	if err != nil {
		return nil, err
	}
	e, err := t.lock(key)
	if err != nil {
		return nil, err
	}
	return &e.tx, nil
}

// expectCursor fails with ErrConflict unless the cursor is from, as the
// Tx sees it.
func (f *Feed[T]) expectCursor(tx *link.Tx, key []byte, d *docState, from int64) error {
	conflict := func() error {
		return fmt.Errorf("%w: the cursor is at %d, not %d: another consumer of the group moved it", tipkv.ErrConflict, d.latest, from)
	}
	read := func() error {
		n, err := readCursor(f.store, key)
		d.latest, d.latestKnown, d.sh.fresh = n, true, true
		return err
	}
	switch {
	case !f.shared:
		if !d.latestKnown {
			if err := read(); err != nil {
				return err
			}
		}
	case d.sh.guarded:
		// The Tx's own view.
	default:
		if d.sh.verify || (d.latestKnown && d.latest != from) {
			// After a failed commit, or when memory says conflict.
			if err := read(); err != nil {
				return err
			}
		}
		if d.latest != from && d.sh.fresh {
			return conflict()
		}
		d.sh.guarded, d.latest = true, from
		c := engine.Absent(key)
		if from > 0 {
			c = engine.Equals(key, codec.AppendAsc(nil, from))
		}
		return tx.Batch.Require(c)
	}
	if d.latest != from {
		return conflict()
	}
	return nil
}

// Lag returns how far the cursor of group trails stream: the time
// between the position of its cursor and that of the newest event stored
// (0 when it is caught up or the stream is empty). A group with no cursor
// (never advanced, or dropped) is ErrNotFound: it has no position to
// trail from. It is one Get and one seek.
func (f *Feed[T]) Lag(stream, group string) (time.Duration, error) {
	if err := checkGroup(stream, group); err != nil {
		return 0, err
	}
	key := groupKey(stream, group)
	v, err := f.store.Get(key)
	if errors.Is(err, engine.ErrNotFound) {
		return 0, fmt.Errorf("%w: stream %q has no group %q (Advance makes it)", tipkv.ErrNotFound, stream, group)
	}
	if err != nil {
		return 0, fmt.Errorf("stream %q, group %q: %w", stream, group, err)
	}
	c, err := decodeCursor(key, v)
	if err != nil {
		return 0, fmt.Errorf("stream %q, group %q: %w", stream, group, err)
	}
	n, err := newestNumber(f.store, namePrefix(codec.FamilyFeed, stream))
	if err != nil {
		return 0, fmt.Errorf("stream %q: %w", stream, err)
	}
	return time.Duration(max(n-c, 0)), nil
}

// Group is a consumer group of a stream, as Groups, AllGroups and
// Backlog return it. It is a copy: the caller may keep it.
type Group struct {
	// Stream is the stream the group consumes; Name is the group's name.
	Stream, Name string
	// Position is the group's cursor: the position of the last event it
	// handled (see Advance).
	Position int64

	// The backlog, as Backlog read it (Groups and AllGroups leave these
	// zero; see groups_list.go). Newest is the stream's newest position
	// (0: no event); Pending counts the events after Position, up to the
	// limit Backlog was given, and More says that more follow; Oldest is
	// the position of the oldest of them (0: none pending).
	Newest  int64
	Pending int
	More    bool
	Oldest  int64
}

// Groups yields the consumer groups of stream that have a cursor (each
// group Advance has moved and DropGroup has not dropped since), in
// bytewise order of their names, with Stream, Name and Position set
// (AllGroups lists the groups of every stream; Backlog tells what a group
// has pending). It reads the store:
// one scan of the stream's cursors, [06 | stream, 06 | stream + 1), and
// never the events. Groups created or dropped while it runs may or may not
// appear. An error (a bad stream name, a cursor that does not decode,
// which matches ErrCorrupt) is yielded once, as the last pair.
func (f *Feed[T]) Groups(stream string) iter.Seq2[Group, error] {
	return func(yield func(Group, error) bool) {
		if err := checkName("stream", stream); err != nil {
			yield(Group{}, err)
			return
		}
		stopped := false
		err := scanCursors(f.store, stream, func(group string, pos int64) bool {
			stopped = !yield(Group{Stream: stream, Name: group, Position: pos}, nil)
			return !stopped
		})
		if err != nil && !stopped {
			yield(Group{}, fmt.Errorf("stream %q: groups: %w", stream, err))
		}
	}
}

// scanCursors calls fn with the group and cursor of each of stream's
// cursors, in key order, until fn returns false. Its error is for the
// caller to yield.
func scanCursors(r engine.Reader, stream string, fn func(group string, pos int64) bool) error {
	lo := codec.AppendString(codec.AppendFamily(nil, codec.FamilyFeedCursors), stream)
	return scanCursorKeys(r, lo, func(k []byte) (Group, error) {
		name, err := decodeGroupName(k[len(lo):])
		return Group{Stream: stream, Name: name}, err
	}, func(g Group) bool { return fn(g.Name, g.Position) })
}

// slowestCursor returns the least cursor of stream's groups,
// math.MaxInt64 when it has none: one scan of its cursors.
func slowestCursor(r engine.Reader, stream string) (int64, error) {
	slowest := int64(math.MaxInt64)
	err := scanCursors(r, stream, func(_ string, n int64) bool {
		slowest = min(slowest, n)
		return true
	})
	if err != nil {
		return 0, err
	}
	return slowest, nil
}
