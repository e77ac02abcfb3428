package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tipkv/tipkv/codec"
)

// familyInfo is one key family's layout, as codec/doc.go specifies it: a
// family byte, named segments, then an optional number.
type familyInfo struct {
	id   codec.Family
	name string
	segs []string // names of the segments, in order
	num  string   // name of the trailing number, "" when there is none
	desc bool     // the number is desc(n), else asc(n)
}

var families = []*familyInfo{
	{id: codec.FamilyMeta, name: "meta", segs: []string{"name"}},
	{id: codec.FamilyVersions, name: "versions", segs: []string{"collection", "id"}, num: "version", desc: true},
	{id: codec.FamilyQueueItems, name: "queue-items", segs: []string{"queue"}, num: "seq"},
	{id: codec.FamilyQueueState, name: "queue-state", segs: []string{"queue"}},
	{id: codec.FamilyFeed, name: "feed", segs: []string{"stream"}, num: "position", desc: true},
	{id: codec.FamilyDeadLetters, name: "dead-letters", segs: []string{"queue"}, num: "seq"},
	{id: codec.FamilyFeedCursors, name: "feed-cursors", segs: []string{"stream", "group"}},
}

// lookupFamily finds a family by name ("versions") or number ("1", "0x01").
func lookupFamily(s string) (*familyInfo, error) {
	for _, f := range families {
		if f.name == s {
			return f, nil
		}
	}
	if n, err := strconv.ParseUint(s, 0, 8); err == nil {
		for _, f := range families {
			if uint64(f.id) == n {
				return f, nil
			}
		}
	}
	names := make([]string, len(families))
	for i, f := range families {
		names[i] = f.name
	}
	return nil, fmt.Errorf("unknown family %q (want one of %s, or its number)", s, strings.Join(names, ", "))
}

func familyOf(b byte) *familyInfo {
	for _, f := range families {
		if byte(f.id) == b {
			return f
		}
	}
	return nil
}

// familyName names a family byte, known or not.
func familyName(b byte) string {
	if f := familyOf(b); f != nil {
		return f.name
	}
	return fmt.Sprintf("0x%02x", b)
}

// familyRange is the key range of family f: [f, f+1).
func familyRange(f codec.Family) (lo, hi []byte) {
	return []byte{byte(f)}, []byte{byte(f) + 1}
}

// keyRange is the keys of one family, or of every family tipkv does not
// write ("other").
type keyRange struct {
	name   string
	lo, hi []byte
}

// keyRanges splits the key space into one range per family, in key order,
// then the rest: together they hold every key a scan of [keyspaceStart,
// keyspaceEnd) reads.
func keyRanges() []keyRange {
	var out []keyRange
	for _, f := range families {
		lo, hi := familyRange(f.id)
		out = append(out, keyRange{f.name, lo, hi})
	}
	last := families[len(families)-1].id
	return append(out, keyRange{"other", []byte{byte(last) + 1}, keyspaceEnd})
}

// keyspaceStart and keyspaceEnd bound a scan of every key: [0x00, 0xFF*64)
// holds every key tipkv writes, and every other key but the empty one and
// those that start with 64 0xFF bytes. (An empty lower bound would reach the
// empty key, but Pebble's invariant checks, on in race builds, index
// key[0] of a seek key.)
var (
	keyspaceStart = []byte{0x00}
	keyspaceEnd   = bytes.Repeat([]byte{0xff}, 64)
)

// key is a key decoded into its parts.
type key struct {
	raw  []byte
	fam  *familyInfo // nil: a family tipkv does not write
	segs [][]byte
	num  int64
	// bad says why the key does not have its family's layout; "" when it
	// does. A bad key keeps the parts decoded before the fault.
	bad string
}

// decodeKey decodes raw by its family's layout. It never fails: a key tipkv
// did not write comes back with bad set. raw is copied.
func decodeKey(raw []byte) key {
	k := key{raw: bytes.Clone(raw)}
	if len(raw) == 0 {
		k.bad = "empty key"
		return k
	}
	k.fam = familyOf(raw[0])
	if k.fam == nil {
		k.bad = fmt.Sprintf("unknown family 0x%02x", raw[0])
		return k
	}
	rest := k.raw[1:]
	for _, name := range k.fam.segs {
		seg, r, err := codec.DecodeBytes(rest)
		if err != nil {
			k.bad = fmt.Sprintf("bad %s segment: %v", name, err)
			return k
		}
		k.segs = append(k.segs, seg)
		rest = r
	}
	if k.fam.num != "" {
		var err error
		if k.fam.desc {
			k.num, rest, err = codec.DecodeDesc(rest)
		} else {
			k.num, rest, err = codec.DecodeAsc(rest)
		}
		if err != nil {
			k.bad = fmt.Sprintf("bad %s: %v", k.fam.num, err)
			return k
		}
	}
	if len(rest) != 0 {
		k.bad = fmt.Sprintf("%d unexpected bytes after the %s", len(rest), k.lastPart())
	}
	return k
}

func (k key) lastPart() string {
	if k.fam.num != "" {
		return k.fam.num
	}
	return k.fam.segs[len(k.fam.segs)-1]
}

// complete reports whether every part of the key decoded.
func (k key) complete() bool { return k.bad == "" }

// seg returns segment i as a string.
// text renders the key for a table: its parts joined by " | ", each
// quoted when it would otherwise be ambiguous, or hex when it is not a key
// tipkv wrote.
func (k key) text() string {
	if k.fam == nil || !k.complete() {
		return "0x" + hex.EncodeToString(k.raw)
	}
	parts := make([]string, 0, len(k.segs)+1)
	for _, s := range k.segs {
		parts = append(parts, quoteIfNeeded(string(s)))
	}
	if k.fam.num != "" {
		parts = append(parts, strconv.FormatInt(k.num, 10))
	}
	return strings.Join(parts, " | ")
}

// fields renders the key for JSON: the family, then each decoded part by
// name. A segment that is not UTF-8 becomes {"hex": "..."}.
func (k key) fields() object {
	obj := object{{"family", familyName(k.raw0())}}
	if k.fam == nil {
		return obj
	}
	for i, s := range k.segs {
		obj = append(obj, field{k.fam.segs[i], segmentJSON(s)})
	}
	if k.fam.num != "" && k.complete() {
		obj = append(obj, field{k.fam.num, k.num})
	}
	return obj
}

func (k key) raw0() byte {
	if len(k.raw) == 0 {
		return 0
	}
	return k.raw[0]
}

func segmentJSON(s []byte) any {
	if utf8.Valid(s) {
		return string(s)
	}
	return object{{"hex", hex.EncodeToString(s)}}
}

// quoteIfNeeded quotes s (Go syntax) when it is empty, holds a space, a
// quote, a '|' or anything unprintable.
func quoteIfNeeded(s string) string {
	if s == "" || !utf8.ValidString(s) || strings.ContainsAny(s, " |\"\\") {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// namePrefix is the encoded form of a name prefix p inside a family: the
// escaped bytes of p without their terminator, so that the range
// [family|prefix, PrefixEnd) holds exactly the keys whose first segment
// starts with p. Escaping maps each byte alone, so it keeps prefixes.
func namePrefix(f codec.Family, p string) (lo, hi []byte) {
	seg := codec.AppendString(nil, p)
	lo = append([]byte{byte(f)}, seg[:len(seg)-2]...)
	return lo, codec.PrefixEnd(lo)
}

// segPrefix is the key prefix of the given complete segments in family f.
func segPrefix(f codec.Family, segs ...string) []byte {
	k := codec.AppendFamily(nil, f)
	for _, s := range segs {
		k = codec.AppendString(k, s)
	}
	return k
}
