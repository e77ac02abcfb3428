// Package codec encodes tipkv keys so that encoded order equals value order:
// for any two keys built from parts of the same kinds, the sign of
// bytes.Compare of their encodings is the sign of comparing the parts in turn.
//
// It also holds the value codecs (msgpack by default, raw bytes, or your own)
// behind the small generic [Value] interface.
//
// # Key format
//
// A key is a family byte followed by parts. Each part has a fixed encoding,
// chosen by its position in the family's layout (there are no per-part type
// tags: the family says what comes next).
//
//	family     1 byte, see the Family constants. 0x00-0x05 are in use,
//	           0x06-0xFF are reserved and never reused.
//
//	segment    a string or byte string, escaped and terminated:
//	           every 0x00 byte becomes 0x00 0xFF, then 0x00 0x01 ends it.
//	           (CockroachDB's and, with a one-byte terminator, FoundationDB's
//	           tuple scheme.) Any bytes are allowed, 0x00 and 0xFF included.
//	           No encoded segment is a prefix of another, so "doc-1" and
//	           "doc-10" never interleave.
//	             ""         -> 00 01
//	             "a"        -> 61 00 01
//	             "a\x00b"   -> 61 00 ff 62 00 01
//	             "a\xff"    -> 61 ff 00 01
//
//	asc(n)     8 bytes big-endian of uint64(n) with the sign bit flipped, so
//	           negative numbers sort before positive ones.
//	             0          -> 80 00 00 00 00 00 00 00
//	             1          -> 80 00 00 00 00 00 00 01
//	             -1         -> 7f ff ff ff ff ff ff ff
//
//	desc(n)    8 bytes big-endian of uint64(n) XOR MaxInt64. For n >= 0 this
//	           is MaxInt64 - n (Java's Long.MAX_VALUE - n gives the same
//	           bytes), so the newest number sorts first; negative numbers
//	           sort after all the others, still in descending order.
//	             0          -> 7f ff ff ff ff ff ff ff
//	             1          -> 7f ff ff ff ff ff ff fe   (9223372036854775806)
//	             MaxInt64   -> 00 00 00 00 00 00 00 00
//	             -1         -> 80 00 00 00 00 00 00 00
//
// # Families
//
//	0x00  meta          00 | name                      store metadata
//	0x01  versions      01 | collection | id | desc(v) document versions
//	0x02  queue items   02 | queue | asc(seq)          queue messages
//	0x03  queue state   03 | queue                     head, tail (lower bounds)
//	0x04  feed events   04 | stream | desc(pos)        event feeds
//	0x05  dead letters  05 | queue | asc(seq)          a queue's dead letters
//
// Families whose layout ends in a number have a prefix (everything before the
// number) and an 8-byte suffix; [Split] finds the boundary, so that Pebble's
// bloom filters and prefix seeks work per document, stream or queue.
//
// The golden vectors in testdata/golden.txt pin these bytes; the layout of
// format 1 is frozen.
package codec
