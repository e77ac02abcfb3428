package versioned

import (
	"bytes"
	"fmt"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/knobs"
	"github.com/tipkv/tipkv/internal/link"
)

// Why knobs.Versioned.DropRangeMin, the fewest versions or events dropped
// at once with one DeleteRange (fewer get point Deletes), is 32 by default.
// Pebble fragments every range tombstone of a memtable again for each new
// iterator after a DeleteRange, so a memtable full of short range
// tombstones makes every read pay for all of them: a loop of Put, Prune(keep 3) and Latest went from 470 us an
// iteration over its first 1,000 to 1,000 us over its 5,000th, where with
// point deletes it stays at 8-15 us over 50,000 (BenchmarkPruneLoop). A
// point tombstone costs nothing to a read that does not step on it, and
// Latest, AsOf and limited History never do: the tombstones lie below the
// versions kept. Reads that walk to the oldest version (a whole History,
// Count) step over every tombstone not yet compacted away, a range's
// fragments or a run's points, and there ranges pay sooner. Dropping 20,000
// versions in runs of n (BenchmarkPruneRuns, ns a version, range/point):
//
//	n    Latest       whole History   Count
//	5    224k/9.8k    426k/367k       566k/326k
//	20   21.7k/6.7k   72.8k/101k      86.7k/96.0k
//	32   8.2k/6.0k    44.6k/63.2k     40.1k/50.7k
//	50   8.1k/9.1k    30.2k/45.9k     29.7k/30.2k
//	64   5.5k/6.0k    19.4k/30.4k     22.2k/34.4k
//	250  5.4k/5.8k    9.8k/15.0k      6.1k/14.3k
//
// Below 32, point deletes win for Latest by up to 23x and lose by at most
// 1.4x elsewhere; from 50 ranges win everywhere.

// latestOf fills d's latest version (and whether it is a delete marker)
// from the store when the Tx does not know it yet.
func (d *docState) latestOf(s engine.Reader, prefix []byte) (int64, error) {
	if !d.latestKnown {
		nv, err := newestVersion(s, prefix, false)
		if err != nil {
			return 0, err
		}
		d.setLatest(nv)
	}
	return d.latest, nil
}

// setLatest makes nv, read from the store, the view's latest version.
func (d *docState) setLatest(nv newest) {
	d.latest, d.deleted, d.expires, d.ltime, d.lval, d.latestKnown = nv.v, nv.deleted, nv.expires, nv.time, nv.raw, true
}

// oldestOf fills d's oldest version from the store when the Tx does not
// know it yet.
func (d *docState) oldestOf(s engine.Reader, prefix []byte) (int64, error) {
	if !d.oldestKnown {
		n, err := oldestNumber(s, prefix)
		if err != nil {
			return 0, err
		}
		d.oldest, d.oldestKnown = n, true
	}
	return d.oldest, nil
}

// newest is what a write learns of a document's latest version.
type newest struct {
	v       int64 // 0: no version
	deleted bool  // a delete marker
	expires int64 // its expiry (Unix ns), 0 for none
	time    int64 // its commit time (Unix ns), 0 for none or unknown
	raw     []byte
}

// newestVersion returns the latest version under a document's prefix (v
// 0 if there is none), with a copy of its stored value when keep is set:
// one prefix seek, answered by the bloom filters when the document has no
// versions. Writes run on the current format only.
func newestVersion(s engine.Reader, prefix []byte, keep bool) (nv newest, err error) {
	it, err := newIter(s, prefix, numberKey(prefix, 0), 1)
	if err != nil {
		return newest{}, err
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			nv, err = newest{}, cerr
		}
	}()
	if !it.SeekPrefixGE(prefix) {
		return newest{}, it.Error()
	}
	if nv.v, err = numberOf(it.Key(), len(prefix)); err != nil {
		return newest{}, err
	}
	raw, err := it.Value()
	if err != nil {
		return newest{}, err
	}
	ver := docfmt.Rules{}.Parse(raw)
	nv.deleted, nv.expires, nv.time = ver.Deleted, ver.Expires, ver.Time
	if keep {
		nv.raw = bytes.Clone(raw)
	}
	return nv, nil
}

// gone reports whether the latest version known is a delete marker or has
// expired by now (clock is read only for an expiring version): then
// PutIf(0) may write the next version.
func (d *docState) gone(clock func() time.Time) bool {
	return d.deleted || (d.expires != 0 && d.expires <= clock().UnixNano())
}

// dropVersions deletes the versions [oldest, cut] of the document under
// prefix and returns how many there were. Versions are dense, so their
// keys are known without reading them: fewer than knobs.Versioned.DropRangeMin get
// point deletes, that many or more one range delete. Either starts at the
// oldest remaining version, so no two tombstones ever cover one key. On a
// shared engine (see shared.go) the oldest version is guarded and the drop
// is always one range delete.
func dropVersions(tx *link.Tx, s engine.Reader, d *docState, prefix []byte, cut int64, shared bool) (int64, error) {
	oldest, err := d.oldestOf(s, prefix)
	if err != nil {
		return 0, err
	}
	if shared {
		if err := d.guardOldest(tx.Batch, prefix); err != nil {
			return 0, err
		}
	}
	if oldest == 0 || cut < oldest {
		return 0, nil
	}
	if _, err := d.latestOf(s, prefix); err != nil {
		return 0, err
	}
	if cut > d.latest {
		return 0, fmt.Errorf("%w: internal error: dropping versions through %d past the latest %d", tipkv.ErrInvalid, cut, d.latest)
	}
	n := cut - oldest + 1
	if n < int64(knobs.Versioned.DropRangeMin) && !shared {
		key := numberKey(prefix, 0)
		for v := oldest; v <= cut; v++ {
			codec.AppendDesc(key[:len(prefix)], v)
			if err := deletePoint(tx, key); err != nil {
				return 0, err
			}
		}
	} else if err := deleteRange(tx, numberKey(prefix, cut), numberKey(prefix, oldest-1)); err != nil {
		return 0, err
	}
	d.oldest = cut + 1
	if cut == d.latest {
		d.latest, d.oldest, d.deleted, d.expires, d.ltime, d.lval = 0, 0, false, 0, 0, nil
	}
	return n, nil
}
