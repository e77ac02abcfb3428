package versioned

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
)

// The trim mark of a stream: positions never go back past a trim.
//
// Append places an event after the stream's last position, which it
// reads back from the store the first time it meets the stream. A trim
// that drops the stream's newest event would take that position with it:
// after a restart (or in another process, whose memory never held it),
// Append would take the clock's time, which may be at or before the
// dropped event, and a group's cursor or a follower at the old position
// would skip the new event. So a trim that drops the newest event it
// knows of (stored, or appended in its own Update) stores its cut as the
// stream's mark, in the feed family at position 0, which no event holds:
//
//	mark  04 | stream | desc(0)  -> asc(cut), 8 bytes
//
// desc(0) is 7f ff ff ff ff ff ff ff, the stream's last key, below every
// event in newest-first order and outside every read of its events
// ([prefix, desc(0)) and spans from position 1). A stream's last position
// is the greater of its newest event and its mark. The cut, not the
// dropped event's position, because the trim drops at commit every
// event at or below the cut, those of Appends racing it included: the
// cut bounds them all. A mark only rises; a stream never trimmed, or
// trimmed below its newest event, has none. Trims below the newest event
// need none: the newest event stays and carries the position, until the
// trim that drops it.
//
// The cost falls on trims and on the first Append to a stream whose last
// position is unknown (one Get beside the seek for the newest event);
// Appends to a live stream read nothing more. On a shared engine the
// trim that raises the mark requires the mark it read (Equals, or no
// mark), so that two racing trims do not lower it, and every Append's
// head guard also requires the mark its process knows: a process whose
// memory missed another's events and their trim fails its commit, reads
// the stream again and appends above the mark.

// markKey returns the key of the trim mark of the stream under prefix.
func markKey(prefix []byte) []byte { return numberKey(prefix, 0) }

// markSuffix is desc(0): what follows the stream's prefix in its mark's
// key.
var markSuffix = codec.AppendDesc(nil, 0)

// isMarkSuffix reports whether rest, a feed key after its stream's name,
// is the mark's: the stream's last key, so that a stream whose first key
// it is holds no event.
func isMarkSuffix(rest []byte) bool { return bytes.Equal(rest, markSuffix) }

// readMark returns the stored trim mark of the stream under prefix, 0
// when it has none.
func readMark(r engine.Reader, prefix []byte) (int64, error) {
	k := markKey(prefix)
	v, err := r.Get(k)
	if errors.Is(err, engine.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return decodeMark(k, v)
}

func decodeMark(key, v []byte) (int64, error) {
	if len(v) != codec.NumberSize {
		return 0, fmt.Errorf("%w: trim mark %x: want %d bytes, have %d", tipkv.ErrCorrupt, key, codec.NumberSize, len(v))
	}
	n, _, err := codec.DecodeAsc(v)
	if err == nil && n < 1 {
		err = fmt.Errorf("%w: trim mark %x: position %d", tipkv.ErrCorrupt, key, n)
	}
	return n, err
}

// markCond is the condition that the stream's stored mark is m (0: that
// it has none).
func markCond(prefix []byte, m int64) engine.Cond {
	if m == 0 {
		return engine.Empty(markKey(prefix), codec.PrefixEnd(prefix))
	}
	return engine.Equals(markKey(prefix), codec.AppendAsc(nil, m))
}

// lastStored returns the stream's last position as the store holds it:
// the greater of its newest event and its mark, and the mark.
func lastStored(r engine.Reader, prefix []byte) (last, mark int64, err error) {
	newest, err := newestNumber(r, prefix)
	if err != nil {
		return 0, 0, err
	}
	if mark, err = readMark(r, prefix); err != nil {
		return 0, 0, err
	}
	return max(newest, mark), mark, nil
}

// topKnown returns the newest position the trim's Tx knows the stream to
// hold: its newest stored event or its own newest Append not yet
// dropped, 0 for none.
func (tr *trimmer) topKnown() (int64, error) {
	top := tr.newest
	if !tr.newestRead {
		var err error
		if top, err = newestNumber(tr.store, tr.prefix); err != nil {
			return 0, err
		}
	}
	if own := tr.own.own(tr.st); len(own) > 0 {
		top = max(top, own[0])
	}
	return top, nil
}

// mark stores cut as the stream's trim mark when the trim drops top, the
// newest event it knows of, and cut is above the mark stored (or written
// by the Tx's trims before). When the Tx commits, the stream's last
// position in memory rises to the mark too, so that this process's
// Appends keep above it as well as those after a restart.
func (tr *trimmer) mark(top, cut int64, shared bool) error {
	if top < 1 || cut < top {
		return nil
	}
	if !tr.d.markRead {
		stored, err := readMark(tr.store, tr.prefix)
		if err != nil {
			return err
		}
		if shared {
			// Two trims racing must not lower the mark: the loser's
			// Update runs again and reads the winner's.
			if err := tr.tx.Batch.Require(markCond(tr.prefix, stored)); err != nil {
				return err
			}
		}
		tr.d.mark, tr.d.markRead = stored, true
	}
	if cut <= tr.d.mark {
		return nil
	}
	if err := tr.tx.Batch.Set(markKey(tr.prefix), codec.AppendAsc(nil, cut)); err != nil {
		return err
	}
	tr.d.mark = cut
	st := tr.st
	tr.tx.OnCommit(func() { st.raise(cut) })
	return nil
}
