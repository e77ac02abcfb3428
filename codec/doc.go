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
//	family     1 byte: which family the key belongs to, and so what comes
//	           next. See "Families" below: 0x00-0x0D are in use, 0x0E-0xFE
//	           are reserved, 0xFF is never a family.
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
// Each family has one layout: its byte, its segments in order, and in some
// families a number. [Families] returns this table, and everything that
// walks the key space reads it there ([Split], tipkv dump, stats, check
// and compact, DB.Compact); the names are those tools print.
//
//	byte  name          layout                               value
//	0x00  meta          00 | name                            store metadata (the format version, ...)
//	0x01  versions      01 | collection | id | desc(version) a document version
//	0x02  queue-items   02 | queue | asc(seq)                a queue message and its header
//	0x03  queue-state   03 | queue                           a queue's head and tail (lower bounds)
//	0x04  feed          04 | stream | desc(position)         a feed event; at position 0, asc(position): the stream's trim mark
//	0x05  dead-letters  05 | queue | asc(seq)                a dead letter and its header
//	0x06  feed-cursors  06 | stream | group                  asc(position): a consumer group's cursor
//	0x07  once          07 | space | name | key              an idempotency key's record (result, hash, scope)
//	0x08  once-due      08 | due | space | name | key        01: a windowed key, by when it ends (due: asc(Unix ns) as a segment)
//	0x09  once-seqs     09 | queue | asc(seq)                the key of a queue's until-done key, by sequence number
//	0x0A  feed-leases   0A | stream | group | asc(epoch)     asc(deadline) member: the lease of a group's active member
//	0x0B  purges        0B | collection | desc(time)         empty: a collection's purge horizon (reads by time before it are ErrPruned)
//	0x0C  queue-control 0C | queue                           a queue's pause and cap on messages in flight
//	0x0D  time-index    0D | collection | id | desc(time)    asc(version): a collection's time index (the id "" holds its state)
//	0x0E-0xFE           reserved: future families take the next free byte
//	0xFF                never a family (see Keyspace)
//
// A family's byte is never reused, nor its layout changed: a new kind of
// record gets a new family. A key ends where its layout ends; a key with
// bytes after them, or a key of a reserved family, is none of tipkv's.
//
// One key of each family, in hex, its parts apart (testdata/golden.txt
// holds these and more):
//
//	meta "format"                       00 666f726d6174 0001
//	versions "users" "alice" 1          01 7573657273 0001 616c696365 0001 7ffffffffffffffe
//	queue-items "jobs" 1                02 6a6f6273 0001 8000000000000001
//	queue-state "jobs"                  03 6a6f6273 0001
//	feed "clicks" 1700000000000000000   04 636c69636b73 0001 68686301c9d5ffff
//	dead-letters "jobs" 42              05 6a6f6273 0001 800000000000002a
//	feed-cursors "clicks" "billing"     06 636c69636b73 0001 62696c6c696e67 0001
//	feed-leases "clicks" "billing" 1    0a 636c69636b73 0001 62696c6c696e67 0001 8000000000000001
//	purges "users" 1                    0b 7573657273 0001 7ffffffffffffffe
//	queue-control "jobs"                0c 6a6f6273 0001
//	time-index "users" "alice" 1700000000000000000
//	                                    0d 7573657273 0001 616c696365 0001 68686301c9d5ffff
//
// Families whose layout ends in a number have a prefix (everything before the
// number) and an 8-byte suffix; [Split] finds the boundary, so that Pebble's
// bloom filters and prefix seeks work per document, stream or queue.
//
// [Keyspace] bounds a walk over the whole store: [00, FF×64). Every key of
// every family lies inside it, since no family is 0xFF.
//
// The golden vectors in testdata/golden.txt pin these bytes, the family
// table included; the layout of format 1 is frozen.
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
