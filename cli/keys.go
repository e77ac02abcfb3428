package cli

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tipkv/tipkv/codec"
)

// families is codec's family table: the layout of every family, in byte
// order, as dump, stats, check and compact name and decode them.
var families = codec.Families()

// lookupFamily finds a family by name ("versions") or number ("1", "0x01").
func lookupFamily(s string) (*codec.Layout, error) {
	for i, f := range families {
		if f.Name == s {
			return &families[i], nil
		}
	}
	if n, err := strconv.ParseUint(s, 0, 8); err == nil {
		if f := familyOf(byte(n)); f != nil {
			return f, nil
		}
	}
	return nil, fmt.Errorf("unknown family %q (want one of %s, or its number)", s, familyNames())
}

// familyNames lists the families' names: "meta, versions, ...".
func familyNames() string {
	names := make([]string, len(families))
	for i, f := range families {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// familyOf returns the layout of family b, nil when b is reserved.
func familyOf(b byte) *codec.Layout {
	for i, f := range families {
		if byte(f.Family) == b {
			return &families[i]
		}
	}
	return nil
}

// familyName names a family byte, known or not.
func familyName(b byte) string { return codec.Family(b).String() }

// familyRange is the key range of family f: [f, f+1).
func familyRange(f codec.Family) (lo, hi []byte) {
	return []byte{byte(f)}, []byte{byte(f) + 1}
}

// key is a key decoded into its parts.
type key struct {
	raw  []byte
	fam  *codec.Layout // nil: a family tipkv does not write
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
	for _, name := range k.fam.Segments {
		seg, r, err := codec.DecodeBytes(rest)
		if err != nil {
			k.bad = fmt.Sprintf("bad %s segment: %v", name, err)
			return k
		}
		k.segs = append(k.segs, seg)
		rest = r
	}
	if k.fam.Numbered() {
		var err error
		if k.fam.Desc {
			k.num, rest, err = codec.DecodeDesc(rest)
		} else {
			k.num, rest, err = codec.DecodeAsc(rest)
		}
		if err != nil {
			k.bad = fmt.Sprintf("bad %s: %v", k.fam.Number, err)
			return k
		}
	}
	if len(rest) != 0 {
		k.bad = fmt.Sprintf("%d unexpected bytes after the %s", len(rest), k.lastPart())
	}
	return k
}

func (k key) lastPart() string {
	if k.fam.Numbered() {
		return k.fam.Number
	}
	return k.fam.Segments[len(k.fam.Segments)-1]
}

// complete reports whether every part of the key decoded.
func (k key) complete() bool { return k.bad == "" }

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
	if k.fam.Numbered() {
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
		obj = append(obj, field{k.fam.Segments[i], segmentJSON(s)})
	}
	if k.fam.Numbered() && k.complete() {
		obj = append(obj, field{k.fam.Number, k.num})
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
