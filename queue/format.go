package queue

import (
	"fmt"
	"math"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/queuefmt"
)

// Keys of one queue (see the package doc):
//
//	item         02 | name | asc(seq)   header + payload
//	state        03 | name              0x01 | uvarint head | uvarint tail (0x02, 0x03: | uvarint count | uvarint countTo)
//	dead letter  05 | name | asc(seq)   header + payload
//	control      0C | name              0x01 | uvarint flags | uvarint maxInFlight [0x02: | leases]
type keys struct {
	itemPrefix []byte // 02 | name
	itemEnd    []byte // the exclusive end of the queue's items
	state      []byte // 03 | name
	deadPrefix []byte // 05 | name
	deadEnd    []byte
	control    []byte // 0C | name
}

func newKeys(name string) keys {
	ip := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), name)
	dp := codec.AppendString(codec.AppendFamily(nil, codec.FamilyDeadLetters), name)
	return keys{
		itemPrefix: ip,
		itemEnd:    codec.PrefixEnd(ip),
		state:      codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), name),
		deadPrefix: dp,
		deadEnd:    codec.PrefixEnd(dp),
		control:    codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueControl), name),
	}
}

// item returns the key of the message at seq, appended to dst.
func (k *keys) item(dst []byte, seq int64) []byte {
	return codec.AppendAsc(append(dst, k.itemPrefix...), seq)
}

// dead returns the key of the dead letter at seq, appended to dst.
func (k *keys) dead(dst []byte, seq int64) []byte {
	return codec.AppendAsc(append(dst, k.deadPrefix...), seq)
}

// seqOf decodes the sequence number of an item or dead-letter key under
// prefix.
func seqOf(prefix, key []byte) (int64, error) {
	if len(key) != len(prefix)+codec.NumberSize {
		return 0, fmt.Errorf("%w: key %x is not a queue key under %x", codec.ErrCorrupt, key, prefix)
	}
	seq, _, err := codec.DecodeAsc(key[len(prefix):])
	if err != nil {
		return 0, fmt.Errorf("%w: key %x", err, key)
	}
	return seq, nil
}

// Value formats: see internal/queuefmt, which the command line tool reads
// too. The queue keeps its own lower-case views of them.
const (
	itemFormat    = queuefmt.ItemFormat
	deadFormat    = queuefmt.DeadFormat
	deadRawFormat = queuefmt.DeadRawFormat
	leasedFormat  = queuefmt.LeasedFormat
)

// header precedes the payload of items and dead letters. attempts counts
// deliveries. at is, for an item, when it becomes visible (0: at once) and,
// for a dead letter, when it was moved there (Unix ns).
type header struct {
	attempts int
	enqueued int64
	at       int64
	headers  []byte // encoded Headers (queuefmt pairs), aliasing the value; nil for none
	meta     []byte // encoded tipkv.Metadata, aliasing the value; nil for none
	group    []byte // the message group's key, aliasing the value; nil for none
}

func appendHeader(dst []byte, tag byte, h header) []byte {
	return queuefmt.AppendHeader(dst, tag, queuefmt.Header{Attempts: h.attempts, Enqueued: h.enqueued, At: h.at, Headers: h.headers, Meta: h.meta, Group: h.group})
}

// parseHeader splits a stored value into its header and payload. The
// payload aliases v.
func parseHeader(v []byte, tag byte) (header, []byte, error) {
	h, rest, err := queuefmt.ParseHeader(v, tag)
	if err != nil && tag == itemFormat && len(v) > 0 && v[0]&^queuefmt.Flags == leasedFormat {
		// An item leased on a shared engine: on an exclusive one, no
		// other process holds the lease, and it ends at at as a delay
		// would.
		h, rest, err = queuefmt.ParseHeader(v, leasedFormat)
	}
	return header{attempts: h.Attempts, enqueued: h.Enqueued, at: h.At, headers: h.Headers, meta: h.Meta, group: h.Group}, rest, err
}

// state is what the queue-state key holds. Every sequence number below head
// is consumed (acknowledged, popped or dead-lettered) and deleted; tail is
// at most the next sequence number to assign. Both are lower bounds; see
// the package doc for why that is crash-consistent. If counted, count is
// the number of live messages below countTo when the value was written
// (Pebble writes it; a store written before it existed, or by a shared
// engine, has none). If run, consumes may have followed the value without
// writing it: a contiguous run of messages from head, which Open finds
// and takes off the count (see "Head, tail and crash consistency" in the
// package doc).
type state struct {
	head, tail     int64
	counted, run   bool
	count, countTo int64
}

func appendState(dst []byte, s state) []byte {
	return queuefmt.AppendState(dst, queuefmt.State{Head: s.head, Tail: s.tail, Counted: s.counted, Count: s.count, CountTo: s.countTo, Run: s.run})
}

func parseState(v []byte) (state, error) {
	s, err := queuefmt.ParseState(v)
	return state{head: s.Head, tail: s.Tail, counted: s.Counted, run: s.Run, count: s.Count, countTo: s.CountTo}, err
}

// maxSeq bounds sequence numbers.
const maxSeq = queuefmt.MaxSeq

// Stored times are Unix nanoseconds in an int64, so a time a queue keeps
// must lie in [minTime, maxTime]: from 1970 to April 2262.
var (
	minTime = time.Unix(0, 0)
	maxTime = time.Unix(0, math.MaxInt64)
)

// checkTime returns an error matching tipkv.ErrInvalid if t is outside
// [minTime, maxTime].
func checkTime(t time.Time) error {
	if t.Before(minTime) || t.After(maxTime) {
		return fmt.Errorf("%w: time %v is outside [%v, %v], which a queue can store", tipkv.ErrInvalid,
			t.UTC().Format(time.RFC3339Nano), minTime.UTC().Format(time.RFC3339), maxTime.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// after returns now+d, or an error matching tipkv.ErrInvalid when that is
// later than maxTime.
func after(now time.Time, d time.Duration) (time.Time, error) {
	t := now.Add(d)
	if d > 0 && t.After(maxTime) {
		return time.Time{}, fmt.Errorf("%w: %v from %v ends after %v, which a queue can store", tipkv.ErrInvalid,
			d, now.UTC().Format(time.RFC3339), maxTime.UTC().Format(time.RFC3339Nano))
	}
	return t, nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
