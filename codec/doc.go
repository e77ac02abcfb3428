// Package codec encodes tipkv keys so that encoded order equals value order:
// for any two keys built from parts of the same kinds, the sign of
// bytes.Compare of their encodings is the sign of comparing the parts in turn.
//
// It also holds the value codecs (msgpack by default, JSON, raw bytes, or
// your own) behind the small generic [Value] interface; see "Values" below.
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
//
// # Values
//
// A value codec turns a T into the bytes stored under a key and back:
//
//	Msgpack[T]{}                      MessagePack, the default
//	Msgpack[T]{IgnoreJSONTags: true}  MessagePack, naming as before json tags were honoured
//	JSON[T]{}                         JSON through encoding/json
//	Raw, String                       []byte and string, stored as they are
//
// Every collection, feed or queue that shares a name must use one codec,
// with one naming, for its whole life: the stored bytes do not say which
// codec wrote them.
//
// # Field names
//
// A struct is stored as a map from field names to values, so the name
// under which each field is stored is part of the stored data. [Msgpack]
// names a field by its `msgpack:"name"` tag, else by its `json:"name"` tag,
// else by its Go name. A Go type shared with an HTTP API thus stores the
// names its JSON uses. A json tag's "-" leaves the field out and its
// omitempty applies; a msgpack tag, when there is one, decides alone.
// Msgpack matches names exactly, case included.
//
// With IgnoreJSONTags, json tags are ignored: a field is named by its
// msgpack tag, else its Go name. That is how every value was stored
// before json tags were honoured, and a store written then must keep
// reading with IgnoreJSONTags: a field with a json tag and no msgpack tag
// was stored under its Go name, and the default would look for it under
// its json name and read it as empty.
//
// [JSON] follows encoding/json: json tags, else the Go name, and on
// decode a name matches case-insensitively.
//
// # When a stored type changes shape
//
// Values already stored are never rewritten; they are decoded into the
// type as it is now. What happens, for every struct codec unless said
// otherwise (each case has a test in value_shape_test.go):
//
//   - A field added: values stored before read it as its zero value.
//   - A field removed: its stored value is skipped, without an error.
//   - A field renamed in Go, without a tag: the stored value is under the
//     old name, so the renamed field reads as its zero value, without an
//     error. Keep the stored name with a tag (`json:"email"`, or
//     `msgpack:"email"` with IgnoreJSONTags) and a rename is safe.
//   - A tag added or changed on an existing field renames it just the same
//     (for Msgpack: a json tag counts too, unless IgnoreJSONTags). JSON
//     forgives a change of case only. To rename a stored field, read both
//     names with msgpack's alias option, `msgpack:"email,alias:Email"`,
//     which writes the new name and reads either.
//   - A field's type changed: a value that converts without loss reads (an
//     integer into a wider integer or a float); one that does not fails
//     with [ErrCorrupt], naming the type, never a silent zero.
//
// To change a type in a way these rules do not cover, write the new shape
// under a new collection, stream or queue name, or keep a version field
// in the value and convert on read.
package codec
