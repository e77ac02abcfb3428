package tipkvwatermill

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/queue"
)

// UUIDHeader is the queue header that carries a message's UUID in a
// consumer group's queue; the message's metadata are the other headers,
// key for key. Publish refuses metadata under this key.
const UUIDHeader = "_watermill_message_uuid"

// recordVersion tags the encoding of a message in a topic's stream.
const recordVersion = 0x01

// A record is a Watermill message as a topic's stream stores it:
//
//	01 | uvarint len(uuid) | uuid | uvarint n | n pairs | payload
//	pair: uvarint len(key) | key | uvarint len(value) | value   (keys sorted)
//
// The payload runs to the end of the value. For example the message
// "id-1" with metadata {"k": "v"} and payload "hi":
//
//	01 04 69 64 2d 31 01 01 6b 01 76 68 69
//
// A value whose first byte is not 01 is refused as corrupt: the tag is
// there so that a later encoding can be told apart.
type record struct {
	uuid     string
	metadata message.Metadata
	payload  []byte
}

// checkMessage refuses what a consumer group's queue could not carry: a
// payload over queue.MaxValueSize, metadata whose encoding (with the
// UUID) is over queue.MaxHeadersSize, metadata under UUIDHeader.
func checkMessage(m *message.Message) error {
	if m == nil {
		return fmt.Errorf("%w: tipkvwatermill: nil message", tipkv.ErrInvalid)
	}
	if len(m.Payload) > queue.MaxValueSize {
		return fmt.Errorf("%w: tipkvwatermill: message %s: payload of %d bytes is over the %d-byte limit", tipkv.ErrInvalid, m.UUID, len(m.Payload), queue.MaxValueSize)
	}
	if _, ok := m.Metadata[UUIDHeader]; ok {
		return fmt.Errorf("%w: tipkvwatermill: message %s: metadata key %q is reserved for the UUID", tipkv.ErrInvalid, m.UUID, UUIDHeader)
	}
	n := pairSize(UUIDHeader, m.UUID)
	for k, v := range m.Metadata {
		n += pairSize(k, v)
	}
	if n > queue.MaxHeadersSize {
		return fmt.Errorf("%w: tipkvwatermill: message %s: UUID and metadata take %d bytes, over the %d-byte limit of queue headers", tipkv.ErrInvalid, m.UUID, n, queue.MaxHeadersSize)
	}
	return nil
}

// pairSize is what one header pair takes in a queue's headers (and in a
// record).
func pairSize(k, v string) int {
	return uvarintLen(len(k)) + len(k) + uvarintLen(len(v)) + len(v)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// appendRecord appends the encoding of m to dst.
func appendRecord(dst []byte, m *message.Message) []byte {
	dst = append(dst, recordVersion)
	dst = appendString(dst, m.UUID)
	dst = binary.AppendUvarint(dst, uint64(len(m.Metadata)))
	keys := make([]string, 0, len(m.Metadata))
	for k := range m.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = appendString(appendString(dst, k), m.Metadata[k])
	}
	return append(dst, m.Payload...)
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decodeRecord decodes a record. The payload aliases b; strings are
// copies. An error matches tipkv.ErrCorrupt.
func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) == 0 || b[0] != recordVersion {
		return r, fmt.Errorf("%w: tipkvwatermill: message record: unknown tag", tipkv.ErrCorrupt)
	}
	rest := b[1:]
	var err error
	if r.uuid, rest, err = readString(rest); err != nil {
		return r, err
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) { // every pair takes 2 bytes at least
		return r, fmt.Errorf("%w: tipkvwatermill: message record: bad metadata count", tipkv.ErrCorrupt)
	}
	rest = rest[k:]
	if n > 0 {
		r.metadata = make(message.Metadata, n)
	}
	for range n {
		var key, val string
		if key, rest, err = readString(rest); err != nil {
			return r, err
		}
		if val, rest, err = readString(rest); err != nil {
			return r, err
		}
		r.metadata[key] = val
	}
	r.payload = rest
	return r, nil
}

func readString(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, fmt.Errorf("%w: tipkvwatermill: message record: bad string length", tipkv.ErrCorrupt)
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}
