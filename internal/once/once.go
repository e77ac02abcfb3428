// Package once keeps idempotency keys: the record that a write guarded by
// a key was made, what it produced, and for how long the key holds. The
// queue's EnqueueOnce and versioned's AppendOnce and PutOnce use it; the
// root package re-exports its error and runs its sweep.
//
// # Keys
//
//	record    07 | space | name | key            0x01 | kind | hash[16] | uvarint result | varint due
//	due       08 | seg(asc(due)) | space | name | key   0x01
//	seq       09 | queue | asc(seq)              the key (bytes)
//
// space is "queue", "stream" or "collection"; name is the queue, stream or
// collection; key is the caller's idempotency key. kind is 1 (a window:
// due is when the key ends, Unix ns), 2 (until done: the queue message
// result is live) or 3 (until forgotten); due is 0 but for windows. hash
// is the first 16 bytes of the SHA-256 of the guarded value's encoding,
// so that the same key with other content is told apart. result is the
// first write's sequence number, position or version.
//
// A windowed record has a due entry (family 0x08), which orders every
// windowed key of the store by when it ends, so that the sweep walks only
// those that ended and deletes their span with one range delete. An
// until-done record has a seq entry (family 0x09), which orders a queue's
// keys by the message they guard, so that the sweep walks only those below
// the queue's head.
//
// # Validity is read, not maintained
//
// A record says whether it holds when it is read: a window until due, an
// until-done key while its message is an item or a dead letter (sequence
// numbers are never reused, so a message that is gone stays gone), an
// until-forgotten key until Forget. Nothing else has to delete a record
// when its key ends (an Ack does not know the message's key): a record
// that no longer holds reads as absent, a new write over it requires it
// unchanged, and the sweep deletes it. An older tipkv, which knows
// nothing of these families, therefore leaves them consistent.
//
// # Atomicity
//
// The record is written in the batch of the write it guards, with a
// condition: the record is absent, or holds the stale bytes that were
// read. Two writers racing with one key, in one process or two, cannot
// both commit; the loser's write runs again (link's retry, or the
// Update's function), reads the record and returns the first result. A
// duplicate inside an Update requires the record it read, so that the
// Update's other writes commit only while the key still holds.
package once

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/link"
)

// ErrMismatch is tipkv.ErrIdempotencyMismatch: a key already guards a
// write of other content.
var ErrMismatch = errors.New("tipkv: idempotency key reused with other content")

// The spaces: what a name names.
const (
	SpaceQueue      = "queue"
	SpaceStream     = "stream"
	SpaceCollection = "collection"
)

// Kind is a record's scope.
type Kind uint8

// The scopes.
const (
	Window         Kind = 1 // until due
	UntilDone      Kind = 2 // while the queue message is an item or a dead letter
	UntilForgotten Kind = 3 // until Forget
)

func (k Kind) String() string {
	switch k {
	case Window:
		return "window"
	case UntilDone:
		return "until-done"
	case UntilForgotten:
		return "until-forgotten"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// HashSize is the size of a record's content hash.
const HashSize = 16

// MaxKeySize is the longest idempotency key, in bytes.
const MaxKeySize = 1024

const (
	recordFormat = 0x01
	dueValue     = 0x01
)

// Record is what a key's record holds.
type Record struct {
	Kind   Kind
	Hash   [HashSize]byte
	Result int64 // the first write's sequence number, position or version
	Due    int64 // Window: when the key ends, Unix ns; 0 otherwise
}

// Hash returns the content hash of an encoded value.
func Hash(b []byte) [HashSize]byte {
	s := sha256.Sum256(b)
	var h [HashSize]byte
	copy(h[:], s[:HashSize])
	return h
}

// Append appends r's encoding to dst.
func (r Record) Append(dst []byte) []byte {
	dst = append(dst, recordFormat, byte(r.Kind))
	dst = append(dst, r.Hash[:]...)
	dst = binary.AppendUvarint(dst, uint64(r.Result))
	return binary.AppendVarint(dst, r.Due)
}

// Parse decodes a record value. Bad bytes match codec.ErrCorrupt.
func Parse(v []byte) (Record, error) {
	var r Record
	if len(v) < 2+HashSize || v[0] != recordFormat {
		return r, fmt.Errorf("%w: idempotency record of %d bytes, tag %x", codec.ErrCorrupt, len(v), v[:min(len(v), 1)])
	}
	r.Kind = Kind(v[1])
	if r.Kind < Window || r.Kind > UntilForgotten {
		return r, fmt.Errorf("%w: idempotency record of kind %d", codec.ErrCorrupt, v[1])
	}
	copy(r.Hash[:], v[2:2+HashSize])
	rest := v[2+HashSize:]
	res, n := binary.Uvarint(rest)
	if n <= 0 || res > 1<<63-1 {
		return r, fmt.Errorf("%w: idempotency record: bad result", codec.ErrCorrupt)
	}
	rest = rest[n:]
	due, n := binary.Varint(rest)
	if n <= 0 || n != len(rest) {
		return r, fmt.Errorf("%w: idempotency record: bad due time", codec.ErrCorrupt)
	}
	r.Result, r.Due = int64(res), due
	return r, nil
}

// RecordKey appends the key of a record to dst.
func RecordKey(dst []byte, space, name, key string) []byte {
	dst = codec.AppendFamily(dst, codec.FamilyOnce)
	dst = codec.AppendString(dst, space)
	dst = codec.AppendString(dst, name)
	return codec.AppendString(dst, key)
}

// DueKey appends the key of a windowed record's due entry to dst.
func DueKey(dst []byte, due int64, space, name, key string) []byte {
	dst = dueBound(dst, due)
	dst = codec.AppendString(dst, space)
	dst = codec.AppendString(dst, name)
	return codec.AppendString(dst, key)
}

// dueBound is 08 | seg(asc(due)): every due entry of an earlier time sorts
// before it, every one of due or later after it.
func dueBound(dst []byte, due int64) []byte {
	dst = codec.AppendFamily(dst, codec.FamilyOnceDue)
	var n [codec.NumberSize]byte
	return codec.AppendBytes(dst, codec.AppendAsc(n[:0], due))
}

// SeqKey appends the key of an until-done record's seq entry to dst.
func SeqKey(dst []byte, queue string, seq int64) []byte {
	dst = seqPrefix(dst, queue)
	return codec.AppendAsc(dst, seq)
}

func seqPrefix(dst []byte, queue string) []byte {
	return codec.AppendString(codec.AppendFamily(dst, codec.FamilyOnceSeqs), queue)
}

// ParseDueKey splits a due entry's key.
func ParseDueKey(k []byte) (due int64, space, name, key string, err error) {
	f, rest, err := codec.DecodeFamily(k)
	if err == nil && f != codec.FamilyOnceDue {
		err = fmt.Errorf("%w: family %s, not once-due", codec.ErrCorrupt, f)
	}
	var d []byte
	if err == nil {
		d, rest, err = codec.DecodeBytes(rest)
	}
	if err == nil {
		var tail []byte
		due, tail, err = codec.DecodeAsc(d)
		if err == nil && len(tail) != 0 {
			err = fmt.Errorf("%w: due segment of %d bytes", codec.ErrCorrupt, len(d))
		}
	}
	if err == nil {
		space, rest, err = codec.DecodeString(rest)
	}
	if err == nil {
		name, rest, err = codec.DecodeString(rest)
	}
	if err == nil {
		key, rest, err = codec.DecodeString(rest)
	}
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: %d bytes after the key", codec.ErrCorrupt, len(rest))
	}
	if err != nil {
		return 0, "", "", "", fmt.Errorf("once-due key %x: %w", k, err)
	}
	return due, space, name, key, nil
}

// Holds reports whether rec, read at now (Unix ns), still holds its key.
// An until-done record asks the store whether its message lives (an item
// or a dead letter of queue name).
func Holds(r engine.Reader, name string, rec Record, now int64) (bool, error) {
	switch rec.Kind {
	case Window:
		return now < rec.Due, nil
	case UntilDone:
		return messageLives(r, name, rec.Result)
	}
	return true, nil
}

// messageLives reports whether the message seq of queue name is an item
// or a dead letter. The item is read first: a message moves from the
// items to the dead letters, never back, so a read that misses it there
// finds it among the dead letters if it lives.
func messageLives(r engine.Reader, queue string, seq int64) (bool, error) {
	var buf [64]byte
	k := buf[:0]
	for _, f := range []codec.Family{codec.FamilyQueueItems, codec.FamilyDeadLetters} {
		k = codec.AppendAsc(codec.AppendString(codec.AppendFamily(k[:0], f), queue), seq)
		_, err := r.Get(k)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, engine.ErrNotFound) {
			return false, err
		}
	}
	return false, nil
}

// Op is one write guarded by a key: Check it in the write's Tx, and when
// it is not a duplicate, make the write and Finish.
type Op struct {
	Space, Name, Key string
	Kind             Kind
	Window           int64 // Window's length, ns
	Hash             [HashSize]byte
	// Lives, if set, answers from memory whether message seq of queue
	// Name is still an item, when it knows (known true): Peek then asks
	// the store nothing more about an until-done record. Nil: the store
	// answers.
	Lives func(seq int64) (lives, known bool)

	rk  []byte // the record's key
	raw []byte // the stale record read by Check, nil for none
	old Record // raw, parsed
}

// CheckKey returns an error matching codec.ErrInvalid for a key no record
// can hold.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty idempotency key", codec.ErrInvalid)
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: idempotency key of %d bytes, over the %d-byte limit", codec.ErrInvalid, len(key), MaxKeySize)
	}
	return nil
}

func (op *Op) recordKey() []byte {
	if op.rk == nil {
		op.rk = RecordKey(nil, op.Space, op.Name, op.Key)
	}
	return op.rk
}

// Peek reads the key's record in r at now, outside any Tx: a write on a DB
// that finds its key held returns without a Tx. It returns the first
// write's result and true when the key holds, an error matching
// ErrMismatch when it holds for other content. An until-done record's
// message is looked up through Lives first, if set.
func (op *Op) Peek(r engine.Reader, now int64) (int64, bool, error) {
	rec, raw, err := op.get(r)
	if err != nil || raw == nil {
		return 0, false, err
	}
	held, known := false, false
	if op.Lives != nil && rec.Kind == UntilDone {
		held, known = op.Lives(rec.Result)
	}
	if !known {
		if held, err = Holds(r, op.Name, rec, now); err != nil {
			return 0, false, err
		}
	}
	if !held {
		return 0, false, nil
	}
	if err := op.match(rec); err != nil {
		return 0, false, err
	}
	return rec.Result, true, nil
}

// read reads the record: held says it holds at now.
func (op *Op) read(r engine.Reader, now int64) (rec Record, raw []byte, held bool, err error) {
	if rec, raw, err = op.get(r); err != nil || raw == nil {
		return rec, nil, false, err
	}
	held, err = Holds(r, op.Name, rec, now)
	return rec, raw, held, err
}

// get reads and parses the record; raw is nil when there is none.
func (op *Op) get(r engine.Reader) (rec Record, raw []byte, err error) {
	raw, err = r.Get(op.recordKey())
	if errors.Is(err, engine.ErrNotFound) {
		return rec, nil, nil
	}
	if err != nil {
		return rec, nil, err
	}
	if rec, err = Parse(raw); err != nil {
		return rec, nil, fmt.Errorf("key %x: %w", op.rk, err)
	}
	return rec, raw, nil
}

func (op *Op) match(rec Record) error {
	if rec.Hash != op.Hash {
		return fmt.Errorf("%w: %s %q: key %q guards the write of %d, of other content", ErrMismatch, op.Space, op.Name, op.Key, rec.Result)
	}
	return nil
}

// txKey is the key of a Tx's state: the records its once-writes made, by
// record key, so that a key used twice in one Update writes once.
type txKey struct{}

type txRecords map[string]Record

// Check runs in tx before the guarded write. When the key holds (written
// earlier in tx, or in the store), it returns the first write's result
// and true, and the batch requires the record as read. Otherwise the
// caller writes and calls Finish with the result.
func (op *Op) Check(tx *link.Tx) (int64, bool, error) {
	if err := CheckKey(op.Key); err != nil {
		return 0, false, err
	}
	recs := tx.State(txKey{}, func() any { return txRecords{} }).(txRecords)
	if rec, ok := recs[string(op.recordKey())]; ok {
		if err := op.match(rec); err != nil {
			return 0, false, err
		}
		return rec.Result, true, nil
	}
	rec, raw, held, err := op.read(tx.DB.Store, tx.Now())
	if err != nil {
		return 0, false, err
	}
	if held {
		if err := op.match(rec); err != nil {
			return 0, false, err
		}
		return rec.Result, true, tx.Batch.Require(engine.Equals(op.rk, raw))
	}
	op.raw, op.old = raw, rec
	return 0, false, nil
}

// Finish writes the record of the guarded write in tx, which produced
// result, on the condition that the record is as Check read it.
func (op *Op) Finish(tx *link.Tx, result int64) error {
	b := tx.Batch
	cond := engine.Absent(op.rk)
	if op.raw != nil {
		cond = engine.Equals(op.rk, op.raw)
		if err := deleteEntries(b, op.Name, op.Key, op.Space, op.old); err != nil {
			return err
		}
	}
	if err := b.Require(cond); err != nil {
		return err
	}
	rec := Record{Kind: op.Kind, Hash: op.Hash, Result: result}
	var buf [128]byte
	switch op.Kind {
	case Window:
		rec.Due = tx.Now() + op.Window
		if err := b.Set(DueKey(buf[:0], rec.Due, op.Space, op.Name, op.Key), []byte{dueValue}); err != nil {
			return err
		}
	case UntilDone:
		if err := b.Set(SeqKey(buf[:0], op.Name, result), []byte(op.Key)); err != nil {
			return err
		}
	}
	if err := b.Set(op.rk, rec.Append(buf[:0])); err != nil {
		return err
	}
	tx.State(txKey{}, nil).(txRecords)[string(op.rk)] = rec
	startSweeper(tx.DB)
	return nil
}

// deleteEntries deletes the index entry of record rec, if it has one.
func deleteEntries(b engine.Batch, name, key, space string, rec Record) error {
	var buf [128]byte
	switch rec.Kind {
	case Window:
		return b.Delete(DueKey(buf[:0], rec.Due, space, name, key))
	case UntilDone:
		return b.Delete(SeqKey(buf[:0], name, rec.Result))
	}
	return nil
}

// Forget deletes the record of key in tx, whatever its scope, on the
// condition that it is as read. It reports whether the key held: a record
// that no longer holds is deleted too, and reported as not held.
func Forget(tx *link.Tx, space, name, key string) (bool, error) {
	if err := CheckKey(key); err != nil {
		return false, err
	}
	op := Op{Space: space, Name: name, Key: key}
	if recs, ok := tx.State(txKey{}, func() any { return txRecords{} }).(txRecords); ok {
		if _, mine := recs[string(op.recordKey())]; mine {
			return false, fmt.Errorf("%w: %s %q: key %q is forgotten in the Update that wrote it", codec.ErrInvalid, space, name, key)
		}
	}
	rec, raw, held, err := op.read(tx.DB.Store, tx.Now())
	if err != nil || raw == nil {
		return false, err
	}
	if err := tx.Batch.Require(engine.Equals(op.rk, raw)); err != nil {
		return false, err
	}
	if err := deleteEntries(tx.Batch, name, key, space, rec); err != nil {
		return false, err
	}
	return held, tx.Batch.Delete(op.rk)
}
