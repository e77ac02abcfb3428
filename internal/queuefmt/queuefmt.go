// Package queuefmt is the byte format of queue values: items, dead letters
// and the queue-state key. The queue package writes and reads it; the
// command line tool reads it to show and check queues without their Go
// types. Every parser returns an error matching codec.ErrCorrupt, never a
// panic.
//
//	item         02 | name | asc(seq)   0x01 | uvarint attempts | varint enqueued | varint at | payload
//	leased item  02 | name | asc(seq)   0x04 | the same fields | payload
//	dead letter  05 | name | asc(seq)   0x02 | the same fields | payload
//	                                    or 0x03 | the stored bytes of an item whose header was corrupt
//	with headers                        tag|0x10 | the same fields | uvarint len | headers | payload
//	with metadata                       tag|0x20 | the same fields | [headers] | uvarint len | metadata | payload
//	in a group                          tag|0x40 | the same fields | [headers] | [metadata] | uvarint len | group | payload
//	state        03 | name              0x01 | uvarint head | uvarint tail
//	counted      03 | name              0x02 | uvarint head | uvarint tail | uvarint count | uvarint countTo
//	run          03 | name              0x03 | the same as 0x02
//	control      0C | name              0x01 | uvarint flags | uvarint maxInFlight
//	counted      0C | name              0x02 | the same | uvarint n | n times: uvarint seq | varint end
//
// Times are Unix nanoseconds, 0 for none. For an item, at is when it becomes
// visible (0: at once); for a leased item, when its lease ends; for a dead
// letter, when it was moved there.
//
// Headers (tags 0x11, 0x12, 0x14: an item, dead letter or leased item whose
// producer set headers) are len bytes of pairs, each uvarint key length |
// key | uvarint value length | value, keys in increasing order, none twice.
// They carry metadata such as trace context. A message without headers
// keeps the tag without 0x10, so values written before headers existed
// read as they did. Example: an item enqueued at 5 with the header
// "k" = "v", payload 0xAB: 11 00 0a 00 04 01 6b 01 76 ab.
//
// Metadata (tags 0x21, 0x22, 0x24, and 0x31, 0x32, 0x34 with headers: a
// message enqueued by a write or an Update that set tipkv.Metadata) is the
// metadata encoding of document versions (internal/docfmt's meta: author,
// reason, correlation and causation ids, headers), after the headers if
// any. It came with store format 4; a message without metadata keeps its
// tag without 0x20.
//
// A group (tags with 0x40: a message enqueued with a group key, see the
// queue package's "Message groups") is the group's key, 1 to MaxGroupSize
// bytes, after the headers and metadata if any. It came within store
// format 4; a reader that predates it takes such a value for corrupt.
//
// The counted state (tag 0x02, written by exclusive engines) adds count,
// the number of live messages with a sequence number below countTo. It
// lets a process open a queue with a few seeks instead of walking every
// live message: it counts only the messages at countTo and after. A reader
// that predates tags 0x02 (state) and 0x1x (items) takes such values for
// corrupt.
//
// The run state (tag 0x03, written by exclusive engines since store format
// 4) holds the same fields, and says that consumes may have followed it
// without writing the key: only a contiguous run of messages from head, so
// that the messages the store no longer holds in [head, min(first live
// message, countTo)) are exactly the counted ones consumed since, and
// count less their number is the count now. head is then a live message
// when the value was written, or at countTo. Under tag 0x02 nothing was
// consumed since the value was written. A reader that predates tag 0x03
// takes it for corrupt.
//
// The control key (family 0x0C) holds what a queue's owner set about its
// deliveries: flag 0x01 pauses it, and maxInFlight, when not 0, caps the
// messages leased at once. Other flags are reserved: a value with one is
// corrupt to this version. The key is absent until the first Pause,
// Resume or SetMaxInFlight (on a shared engine, or the queue's first
// delivery, which writes it with no flag and no cap); its family came
// within store format 4, and a
// release before it ignores the key (it delivers from a paused queue) and
// reports it as a key of an unknown family. A capped queue on a shared
// engine counts its leases in the key (tag 0x02, written by every write
// that takes, ends or moves a lease there): the sequence number and lease
// end (Unix ns) of every message leased, in increasing order of sequence
// number, some of them maybe ended already. Tag 0x01 with a cap on a
// shared engine means the leases are not counted yet. Pebble counts
// leases in memory and writes tag 0x01 only.
//
// Leased items are written only on shared engines (Caps.Shared), where a
// lease must live in the store for the other processes to see it; on an
// exclusive engine leases live in memory and every item has tag 0x01. A
// reader that predates tag 0x04 takes such an item for corrupt.
package queuefmt

import (
	"encoding/binary"
	"fmt"

	"github.com/tipkv/tipkv/codec"
)

// The first byte of every value is a tag, so a later format can be told
// apart; a value with an unknown tag is corrupt to this version.
const (
	ItemFormat    = 0x01 // a message in the queue
	DeadFormat    = 0x02 // a message in the dead-letter queue
	DeadRawFormat = 0x03 // tag | the bytes of a queue item whose header was corrupt
	LeasedFormat  = 0x04 // a message in the queue, leased until at (shared engines)
	StateFormat   = 0x01 // the queue-state key
	CountedFormat = 0x02 // the queue-state key with a count of live messages
	RunFormat     = 0x03 // the counted state, which consumes may have followed
	ControlFormat = 0x01 // the queue-control key
	CountedLeases = 0x02 // the queue-control key with the leases it counts

	// HeadersFlag is or-ed into an item, leased item or dead letter tag
	// whose value carries headers.
	HeadersFlag = 0x10
	// MetaFlag is or-ed into an item, leased item or dead letter tag whose
	// value carries metadata.
	MetaFlag = 0x20
	// GroupFlag is or-ed into an item, leased item or dead letter tag
	// whose message belongs to a group.
	GroupFlag = 0x40
	// Flags are the bits of a tag that say what a header carries.
	Flags = HeadersFlag | MetaFlag | GroupFlag
)

// MaxGroupSize bounds a message group's key, in bytes.
const MaxGroupSize = 1 << 10

// MaxMetaSize bounds the encoded metadata of one message, in bytes: the
// bound of a document version's.
const MaxMetaSize = 16 << 10

// MaxHeadersSize bounds the encoded headers of one message, in bytes.
const MaxHeadersSize = 16 << 10

// MaxSeq bounds sequence numbers, far beyond any queue's life: a queue that
// takes a billion messages a second runs 146 years.
const MaxSeq = 1 << 62

// maxAttempts bounds a stored attempt count.
const maxAttempts = 1 << 31

// Header precedes the payload of items and dead letters.
type Header struct {
	Attempts int   // deliveries so far
	Enqueued int64 // Unix ns
	At       int64 // Unix ns: visible-at for items, moved-at for dead letters
	// Headers are the encoded header pairs (see AppendPair), nil for none.
	// ParseHeader checks them and returns them aliasing the value.
	Headers []byte
	// Meta is the encoded metadata, nil for none. ParseHeader checks only
	// its length and returns it aliasing the value: it is decoded (and
	// checked) when asked for.
	Meta []byte
	// Group is the message group's key, nil for none; ParseHeader
	// returns it aliasing the value.
	Group []byte
}

// AppendHeader appends tag and h to dst: tag|HeadersFlag if h has
// headers, |MetaFlag if it has metadata, |GroupFlag if it has a group.
func AppendHeader(dst []byte, tag byte, h Header) []byte {
	if len(h.Headers) > 0 {
		tag |= HeadersFlag
	}
	if len(h.Meta) > 0 {
		tag |= MetaFlag
	}
	if len(h.Group) > 0 {
		tag |= GroupFlag
	}
	dst = append(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(h.Attempts))
	dst = binary.AppendVarint(dst, h.Enqueued)
	dst = binary.AppendVarint(dst, h.At)
	if len(h.Headers) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(h.Headers)))
		dst = append(dst, h.Headers...)
	}
	if len(h.Meta) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(h.Meta)))
		dst = append(dst, h.Meta...)
	}
	if len(h.Group) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(h.Group)))
		dst = append(dst, h.Group...)
	}
	return dst
}

// AppendPair appends one header pair to dst, an encoding of headers. The
// caller appends pairs in increasing order of key, each key once.
func AppendPair(dst []byte, key, value string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...)
}

// Pairs calls f with each pair of the encoded headers hs, checked by
// ParseHeader (or CheckHeaders) first; key and value alias hs.
func Pairs(hs []byte, f func(key, value []byte)) {
	for len(hs) > 0 {
		k, v, rest, err := nextPair(hs)
		if err != nil {
			return
		}
		f(k, v)
		hs = rest
	}
}

func nextPair(hs []byte) (key, value, rest []byte, err error) {
	n, w := binary.Uvarint(hs)
	if w <= 0 || n > uint64(len(hs)-w) {
		return nil, nil, nil, fmt.Errorf("%w: bad header key", codec.ErrCorrupt)
	}
	key, hs = hs[w:w+int(n)], hs[w+int(n):]
	n, w = binary.Uvarint(hs)
	if w <= 0 || n > uint64(len(hs)-w) {
		return nil, nil, nil, fmt.Errorf("%w: bad header value", codec.ErrCorrupt)
	}
	return key, hs[w : w+int(n)], hs[w+int(n):], nil
}

// CheckHeaders checks encoded headers: well formed, keys in increasing
// order and none twice, at most MaxHeadersSize bytes.
func CheckHeaders(hs []byte) error {
	if len(hs) > MaxHeadersSize {
		return fmt.Errorf("%w: headers of %d bytes, over %d", codec.ErrCorrupt, len(hs), MaxHeadersSize)
	}
	var last []byte
	for first := true; len(hs) > 0; first = false {
		k, _, rest, err := nextPair(hs)
		if err != nil {
			return err
		}
		if !first && string(k) <= string(last) {
			return fmt.Errorf("%w: header keys out of order", codec.ErrCorrupt)
		}
		last, hs = k, rest
	}
	return nil
}

// ParseHeader splits a stored value that must start with tag (or
// tag with flags) into its header and payload. The payload and headers
// alias v.
func ParseHeader(v []byte, tag byte) (Header, []byte, error) {
	var h Header
	if len(v) == 0 || v[0]&^Flags != tag || tag&Flags != 0 || tag == DeadRawFormat {
		return h, nil, fmt.Errorf("%w: value does not start with tag 0x%02x", codec.ErrCorrupt, tag)
	}
	withHeaders, withMeta, withGroup := v[0]&HeadersFlag != 0, v[0]&MetaFlag != 0, v[0]&GroupFlag != 0
	rest := v[1:]
	a, n := binary.Uvarint(rest)
	if n <= 0 || a > maxAttempts {
		return h, nil, fmt.Errorf("%w: bad attempts count", codec.ErrCorrupt)
	}
	rest = rest[n:]
	e, n := binary.Varint(rest)
	if n <= 0 {
		return h, nil, fmt.Errorf("%w: bad enqueue time", codec.ErrCorrupt)
	}
	rest = rest[n:]
	at, n := binary.Varint(rest)
	if n <= 0 {
		return h, nil, fmt.Errorf("%w: bad time", codec.ErrCorrupt)
	}
	h.Attempts, h.Enqueued, h.At = int(a), e, at
	rest = rest[n:]
	if withHeaders {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l == 0 || l > uint64(len(rest)-n) {
			return Header{}, nil, fmt.Errorf("%w: bad headers length", codec.ErrCorrupt)
		}
		hs := rest[n : n+int(l)]
		if err := CheckHeaders(hs); err != nil {
			return Header{}, nil, err
		}
		h.Headers, rest = hs, rest[n+int(l):]
	}
	if withMeta {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l == 0 || l > MaxMetaSize || l > uint64(len(rest)-n) {
			return Header{}, nil, fmt.Errorf("%w: bad metadata length", codec.ErrCorrupt)
		}
		h.Meta, rest = rest[n:n+int(l)], rest[n+int(l):]
	}
	if withGroup {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l == 0 || l > MaxGroupSize || l > uint64(len(rest)-n) {
			return Header{}, nil, fmt.Errorf("%w: bad group length", codec.ErrCorrupt)
		}
		h.Group, rest = rest[n:n+int(l)], rest[n+int(l):]
	}
	return h, rest, nil
}

// ParseItem splits a stored queue item, leased (LeasedFormat) or not
// (ItemFormat), into its header and payload, and says which it is. The
// payload aliases v.
func ParseItem(v []byte) (h Header, leased bool, payload []byte, err error) {
	if len(v) > 0 && v[0]&^Flags == LeasedFormat {
		h, payload, err = ParseHeader(v, LeasedFormat)
		return h, true, payload, err
	}
	h, payload, err = ParseHeader(v, ItemFormat)
	return h, false, payload, err
}

// State is what the queue-state key holds: every sequence number below Head
// is consumed and deleted; Tail is at most the next one to assign. Both are
// lower bounds (see the queue package doc). If Counted, Count is the
// number of live messages below CountTo (at most Tail) when the value was
// written. If Run (which implies Counted), consumes may have followed it
// unstored: a contiguous run of the messages from Head (see the package
// doc).
type State struct {
	Head, Tail     int64
	Counted        bool
	Count, CountTo int64
	Run            bool
}

// AppendState appends the encoding of s to dst: tag RunFormat if s is Run,
// else CountedFormat if it is Counted, else StateFormat.
func AppendState(dst []byte, s State) []byte {
	tag := byte(StateFormat)
	switch {
	case s.Run:
		tag = RunFormat
	case s.Counted:
		tag = CountedFormat
	}
	dst = append(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(s.Head))
	dst = binary.AppendUvarint(dst, uint64(s.Tail))
	if s.Counted {
		dst = binary.AppendUvarint(dst, uint64(s.Count))
		dst = binary.AppendUvarint(dst, uint64(s.CountTo))
	}
	return dst
}

// ParseState decodes a queue-state value.
func ParseState(v []byte) (State, error) {
	if len(v) == 0 || (v[0] != StateFormat && v[0] != CountedFormat && v[0] != RunFormat) {
		return State{}, fmt.Errorf("%w: queue state does not start with tag 0x%02x, 0x%02x or 0x%02x", codec.ErrCorrupt, StateFormat, CountedFormat, RunFormat)
	}
	var nums [4]int64
	n := 2
	if v[0] != StateFormat {
		n = 4
	}
	rest := v[1:]
	for i := range n {
		x, w := binary.Uvarint(rest)
		if w <= 0 || x > MaxSeq || (i == n-1 && w != len(rest)) {
			return State{}, fmt.Errorf("%w: queue state: bad %s", codec.ErrCorrupt, [4]string{"head", "tail", "count", "count end"}[i])
		}
		nums[i], rest = int64(x), rest[w:]
	}
	s := State{Head: nums[0], Tail: nums[1]}
	if n == 4 {
		s.Counted, s.Count, s.CountTo, s.Run = true, nums[2], nums[3], v[0] == RunFormat
		if s.CountTo > s.Tail {
			return State{}, fmt.Errorf("%w: queue state: count end %d past tail %d", codec.ErrCorrupt, s.CountTo, s.Tail)
		}
	}
	return s, nil
}

// PausedFlag is the flag of a paused queue in its control value.
const PausedFlag = 0x01

// MaxInFlight bounds a control value's maxInFlight, and the leases it
// counts.
const MaxInFlight = 1 << 12

// MaxLeaseSize is the most bytes one counted lease takes in a control
// value.
const MaxLeaseSize = 2 * binary.MaxVarintLen64

// Control is what the queue-control key holds: whether deliveries are
// paused, the most messages leased at once (0: no cap) and, if Counted,
// the leases counted against the cap.
type Control struct {
	Paused      bool
	MaxInFlight int
	Counted     bool
	Leases      []Lease // by Seq, increasing
}

// Lease is a message leased, as the control key counts it: until End,
// in Unix ns.
type Lease struct{ Seq, End int64 }

// AppendControl appends the encoding of c to dst: tag CountedLeases if c
// is Counted, ControlFormat if not.
func AppendControl(dst []byte, c Control) []byte {
	var flags uint64
	if c.Paused {
		flags |= PausedFlag
	}
	tag := byte(ControlFormat)
	if c.Counted {
		tag = CountedLeases
	}
	dst = append(dst, tag)
	dst = binary.AppendUvarint(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(c.MaxInFlight))
	if c.Counted {
		dst = binary.AppendUvarint(dst, uint64(len(c.Leases)))
		for _, l := range c.Leases {
			dst = binary.AppendUvarint(dst, uint64(l.Seq))
			dst = binary.AppendVarint(dst, l.End)
		}
	}
	return dst
}

// ParseControl decodes a queue-control value.
func ParseControl(v []byte) (Control, error) {
	if len(v) == 0 || (v[0] != ControlFormat && v[0] != CountedLeases) {
		return Control{}, fmt.Errorf("%w: queue control does not start with tag 0x%02x or 0x%02x", codec.ErrCorrupt, ControlFormat, CountedLeases)
	}
	c := Control{Counted: v[0] == CountedLeases}
	flags, w := binary.Uvarint(v[1:])
	if w <= 0 || flags&^PausedFlag != 0 {
		return Control{}, fmt.Errorf("%w: queue control: bad flags", codec.ErrCorrupt)
	}
	c.Paused = flags&PausedFlag != 0
	rest := v[1+w:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > MaxInFlight || (!c.Counted && w != len(rest)) {
		return Control{}, fmt.Errorf("%w: queue control: bad max in flight", codec.ErrCorrupt)
	}
	c.MaxInFlight, rest = int(n), rest[w:]
	if !c.Counted {
		return c, nil
	}
	n, w = binary.Uvarint(rest)
	if w <= 0 || n > MaxInFlight || n > uint64(len(rest)-w)/2 {
		return Control{}, fmt.Errorf("%w: queue control: bad count of leases", codec.ErrCorrupt)
	}
	rest = rest[w:]
	if n > 0 {
		c.Leases = make([]Lease, n)
	}
	for i := range c.Leases {
		seq, w := binary.Uvarint(rest)
		if w <= 0 || seq < 1 || seq > MaxSeq || (i > 0 && int64(seq) <= c.Leases[i-1].Seq) {
			return Control{}, fmt.Errorf("%w: queue control: bad lease %d", codec.ErrCorrupt, i)
		}
		end, w2 := binary.Varint(rest[w:])
		if w2 <= 0 {
			return Control{}, fmt.Errorf("%w: queue control: bad end of lease %d", codec.ErrCorrupt, i)
		}
		c.Leases[i], rest = Lease{Seq: int64(seq), End: end}, rest[w+w2:]
	}
	if len(rest) != 0 {
		return Control{}, fmt.Errorf("%w: queue control: %d bytes after the leases", codec.ErrCorrupt, len(rest))
	}
	return c, nil
}
