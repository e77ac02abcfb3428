package tipkv

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
)

// An upgrade in place never changes what a stored value reads as. Format 4
// gave meaning to document values that start with C1 and a tag 0x10-0x17
// (the version header with the commit time), format 3 to those that start
// with C1 00 or C1 01 (an escape, an expiry header) and format 2 to the
// single byte C1 (a delete marker), which the formats before them stored
// as documents. Upgrading a store of format 1 or 2 therefore rewrites
// every document version whose value starts with C1 into C1 00 | value
// (docfmt.Upgrade), format 2's delete markers excepted. Format 3 wrote no
// value that format 4 reads otherwise (its markers, escapes and expiry
// headers read the same, and every other value does not start with C1),
// but a store of format 3 may hold values of format 2 that tipkv before
// issue 24's fix upgraded without escaping them: upgrading from format 3
// walks the versions the same way and escapes those that format 4 would
// take for a version header. Format 4 also gave meaning to feed event
// values that start with C1 (an escape, a header with metadata: docfmt's
// event.go), which formats 1 to 3 stored as events: upgrading from any of
// them escapes every event value that starts with C1
// (docfmt.UpgradeEvent). Every other key stays as it is; no other family
// gained a meaning in format 4.
//
// The upgrade is a walk of the versions family, then of the feed family,
// in chunks, and the store says where it is:
//
//	00 | "format"   the new format, from the first batch on
//	00 | "upgrade"  "<from> <hex of the first key not yet upgraded>", while
//	                the walk goes on; deleted by the batch of its last chunk
//
// The first batch moves the format key and writes the upgrade key, on the
// condition that the format key still holds the old format and no upgrade
// is recorded. Each chunk's rewrites go in one batch with the upgrade key's
// new position, on the condition that the upgrade key still holds the
// position the chunk was read from. Hence:
//
//   - a crash leaves the store untouched (before the first batch) or with
//     the upgrade key naming where to go on, which the next Open (for
//     writing) does: a value is never escaped twice, as escaping is not
//     idempotent;
//   - several processes opening one store of a shared engine at once each
//     walk from the recorded position, and a chunk read by two of them
//     commits once: the other's condition fails and it reads the position
//     again;
//   - an older tipkv refuses the store as soon as the first batch is in,
//     by its format key (it reads formats up to its own). On Pebble the
//     marker file (TIPKV) names the old format until the upgrade is done,
//     and the new one after: the format key is what older versions check
//     first.
//
// A read-only Open of a store whose upgrade is unfinished is refused
// (ErrFormat, saying to open it for writing once); a read-only Open of a
// store not yet upgraded reads it by its own format's rules
// (docfmt.RulesOf), on Pebble. On a shared engine another process could
// upgrade the store under such a reader, so that is refused too.

// upgradeKey records an upgrade in progress.
var upgradeKey = metaKey("upgrade")

// The bounds of one chunk of an upgrade, below the engine's own (Caps).
var (
	upgradeScanKeys   = 1 << 16 // keys read
	upgradeChunkOps   = 1024    // values rewritten
	upgradeChunkBytes = 4 << 20 // bytes of keys and values rewritten
)

// upgradeReserve is what a chunk's batch keeps of Caps.MaxBatchBytes for its
// condition and the upgrade key's new position (keys are at most a few KiB).
const upgradeReserve = 16 << 10

// upgradeHook, when set (by tests), is called at each step of an upgrade:
// "begin" before the first batch, "started" after it, "apply" before a
// chunk's batch is applied, "applied" after it is applied and before it is
// durable, and "durable" after. escaped is the number of values the chunk
// rewrites.
var upgradeHook func(db *DB, step string, escaped int)

func (db *DB) upgradeStep(step string, escaped int) {
	if upgradeHook != nil {
		upgradeHook(db, step, escaped)
	}
}

// upgradeState is the upgrade key's value.
type upgradeState struct {
	from int    // the format the store had
	next []byte // the first key of the versions family not yet upgraded
}

func (u upgradeState) encode() []byte {
	return fmt.Appendf(nil, "%d %x", u.from, u.next)
}

func parseUpgrade(v []byte) (upgradeState, error) {
	from, next, ok := strings.Cut(string(v), " ")
	n, err := strconv.Atoi(from)
	if !ok || err != nil || n < 1 || n >= docfmt.TimeFormat {
		return upgradeState{}, fmt.Errorf("%w: the upgrade key holds %q", ErrCorrupt, v)
	}
	k, err := hex.DecodeString(next)
	if err != nil || len(k) == 0 || k[0] != byte(codec.FamilyVersions) && k[0] != byte(codec.FamilyFeed) {
		return upgradeState{}, fmt.Errorf("%w: the upgrade key holds %q", ErrCorrupt, v)
	}
	return upgradeState{from: n, next: k}, nil
}

// upgradeStats counts what this process did in an upgrade.
type upgradeStats struct {
	from             int
	scanned, escaped int
	chunks, retries  int
	start            time.Time
}

// upgrade upgrades a store of format from (its format key holding old) to
// FormatVersion. It returns engine.ErrConditionFailed when another process
// moved the format key first: the caller reads the format again.
func (db *DB) upgrade(from int, old []byte, names string) error {
	if from >= docfmt.TimeFormat {
		return db.writeFormat(names) // no value gains a meaning
	}
	st := &upgradeStats{from: from, start: time.Now()}
	b := db.core.Store.NewBatch()
	defer b.Close()
	for _, c := range []engine.Cond{engine.Equals(formatKey, old), engine.Absent(upgradeKey)} {
		if err := b.Require(c); err != nil {
			return err
		}
	}
	if err := b.Set(formatKey, []byte(strconv.Itoa(FormatVersion))); err != nil {
		return err
	}
	if err := b.Set(namesKey, []byte(names)); err != nil {
		return err
	}
	first := upgradeState{from: from, next: []byte{byte(codec.FamilyVersions)}}
	if err := b.Set(upgradeKey, first.encode()); err != nil {
		return err
	}
	db.upgradeStep("begin", 0)
	if err := commit(b); err != nil {
		return err
	}
	db.upgradeStep("started", 0)
	return db.finishUpgrade(st)
}

// finishUpgrade walks the versions family from where the upgrade key says,
// chunk by chunk, until the upgrade key is gone (this process or another
// deleted it with the last chunk).
func (db *DB) finishUpgrade(st *upgradeStats) error {
	for {
		cur, err := db.core.Store.Get(upgradeKey)
		if errors.Is(err, engine.ErrNotFound) {
			db.logUpgrade(st)
			return nil
		}
		if err != nil {
			return fmt.Errorf("tipkv: open %s: upgrade: %w", db.core.Name, err)
		}
		u, err := parseUpgrade(cur)
		if err != nil {
			return fmt.Errorf("%s: %w", db.core.Name, err)
		}
		if st.from == 0 {
			st.from = u.from
		}
		err = db.upgradeChunk(cur, u, st)
		switch {
		case err == nil:
		case errors.Is(err, engine.ErrConditionFailed), errors.Is(err, engine.ErrUnknownOutcome):
			// Another process upgraded this chunk, or this one did and
			// the answer was lost: the upgrade key says which.
			st.retries++
		default:
			return fmt.Errorf("tipkv: open %s: upgrade from format %d: %w", db.core.Name, u.from, err)
		}
	}
}

// upgradeChunk upgrades the next chunk of the versions family from u.next,
// in one batch that moves the upgrade key (cur) on, or deletes it after the
// family's last key.
func (db *DB) upgradeChunk(cur []byte, u upgradeState, st *upgradeStats) error {
	maxOps, budget := upgradeChunkOps, upgradeChunkBytes
	if db.core.Caps.MaxBatchOps > 0 {
		maxOps = max(1, min(maxOps, db.core.Caps.MaxBatchOps-1)) // one write for the upgrade key
	}
	hardBytes := 0 // the most one rewrite may take, 0: no limit
	if db.core.Caps.MaxBatchBytes > 0 {
		hardBytes = db.core.Caps.MaxBatchBytes - upgradeReserve
		budget = min(budget, hardBytes)
	}
	b := db.core.Store.NewBatch()
	defer b.Close()
	if err := b.Require(engine.Equals(upgradeKey, cur)); err != nil {
		return err
	}
	fam := codec.Family(u.next[0]) // the versions family, then the feeds
	hi := []byte{byte(fam) + 1}
	it, err := engine.NewIterN(db.core.Store, u.next, hi, upgradeScanKeys+1)
	if err != nil {
		return err
	}
	defer it.Close() // on an early return; a second Close returns nil
	var last []byte
	scanned, escaped, size, done := 0, 0, 0, true
	for ok := it.First(); ok; ok = it.Next() {
		if scanned == upgradeScanKeys || escaped == maxOps {
			done = false
			break
		}
		v, err := it.Value()
		if err != nil {
			return err
		}
		k := it.Key()
		upgrade := docfmt.Upgrade
		if fam == codec.FamilyFeed {
			upgrade = docfmt.UpgradeEvent
		}
		if nv, changed := upgrade(u.from, v); changed {
			n := len(k) + len(nv)
			if escaped > 0 && size+n > budget {
				done = false
				break
			}
			if (hardBytes > 0 && n > hardBytes) || (db.core.Caps.MaxValueSize > 0 && len(nv) > db.core.Caps.MaxValueSize) {
				return fmt.Errorf("%w: the value at key %x starts with the byte C1, so it must be stored escaped (2 bytes more, %d bytes), which is over the engine's limits (a value of at most %d bytes, a batch of at most %d): raise the engine's limits and open the store again (until then it is refused)",
					ErrInvalid, k, len(nv), db.core.Caps.MaxValueSize, db.core.Caps.MaxBatchBytes)
			}
			if err := b.Set(k, nv); err != nil {
				return err
			}
			escaped++
			size += n
		}
		last = append(last[:0], k...)
		scanned++
	}
	if err := it.Close(); err != nil { // before the commit: a shared engine's view is released
		return err
	}
	switch {
	case done && fam == codec.FamilyVersions:
		// On to the feed events (queues have no values to upgrade).
		next := upgradeState{from: u.from, next: []byte{byte(codec.FamilyFeed)}}
		err = b.Set(upgradeKey, next.encode())
	case done:
		err = b.Delete(upgradeKey)
	default:
		next := upgradeState{from: u.from, next: append(last, 0x00)} // the key's immediate successor
		if last == nil {
			next.next = u.next // nothing read: cannot happen with the bounds above
		}
		err = b.Set(upgradeKey, next.encode())
	}
	if err != nil {
		return err
	}
	db.upgradeStep("apply", escaped)
	if err := b.Apply(true); err != nil {
		return err
	}
	db.upgradeStep("applied", escaped)
	if err := b.Wait(); err != nil {
		return err
	}
	db.upgradeStep("durable", escaped)
	st.scanned += scanned
	st.escaped += escaped
	st.chunks++
	return nil
}

// commit applies b, synced, and waits until it is durable.
func commit(b engine.Batch) error {
	if err := b.Apply(true); err != nil {
		return err
	}
	return b.Wait()
}

func (db *DB) logUpgrade(st *upgradeStats) {
	if st.chunks == 0 && st.retries == 0 {
		return // another process did it all
	}
	l := db.opts.Logger
	if l == nil {
		return
	}
	l.LogAttrs(context.Background(), slog.LevelInfo, "tipkv: store format upgraded",
		slog.String("event", "format-upgrade"), slog.String("store", db.core.Name),
		slog.Int("from", st.from), slog.Int("to", FormatVersion),
		slog.Int("versions_read", st.scanned), slog.Int("values_escaped", st.escaped),
		slog.Int("chunks", st.chunks), slog.Int("retries", st.retries),
		slog.Duration("elapsed", time.Since(st.start)))
}
