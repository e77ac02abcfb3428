package cli

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/tipkv/tipkv/internal/docfmt"
)

// maxCell is the widest value a table shows; --json shows every value whole.
const maxCell = 100

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns. Call row for each line, then flush.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(toAny(header)...)
	}
	return t
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, strings.NewReplacer("\t", " ", "\n", " ").Replace(fmt.Sprint(c)))
	}
	fmt.Fprintln(t.tw)
}

func (t *table) flush() error { return t.tw.Flush() }

// valueCell renders a value for a table: its JSON, cut at maxCell runes.
func valueCell(v any) string {
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return truncate(string(b))
}

func truncate(s string) string {
	if utf8.RuneCountInString(s) <= maxCell {
		return s
	}
	r := []rune(s)
	return string(r[:maxCell-1]) + "…"
}

// hexCell renders raw bytes for a table, cut at maxCell.
func hexCell(b []byte) string { return truncate("0x" + hex.EncodeToString(b)) }

// decoded is a value as the commands show it: decoded from msgpack, taken
// as it is when it is JSON (codec.JSON), or the reason it did not decode.
type decoded struct {
	value any
	err   error
	raw   []byte
	json  bool  // the value is JSON, not msgpack
	exp   int64 // a document version's expiry (Unix ns), 0 for none
	// deleted marks a document version that is a delete marker: it has
	// no value.
	deleted bool
}

// decode decodes a stored value: msgpack first (the default codec), else
// JSON. The two overlap only on a JSON number of one digit, which is also
// a whole msgpack value (the integers 48 to 57): it shows as msgpack. raw
// is copied: a scan's value is the iterator's, valid only until its next
// step.
func decode(raw []byte) decoded {
	raw = bytes.Clone(raw)
	v, err := decodeValue(raw)
	if err != nil && json.Valid(raw) {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			return decoded{value: json.RawMessage(buf.Bytes()), raw: raw, json: true}
		}
	}
	return decoded{value: v, err: err, raw: raw}
}

// decodeVersion decodes a document version as it is stored (package
// docfmt): a delete marker is shown as deleted, an expiry header before
// the document is shown apart, and the document decoded. raw stays the
// whole stored value. fm are the rules of the store's format.
func decodeVersion(stored []byte, fm docfmt.Rules) decoded {
	if fm.IsDeleteMarker(stored) {
		return decoded{deleted: true, raw: bytes.Clone(stored)}
	}
	doc, exp := fm.Split(stored)
	d := decode(doc)
	d.raw, d.exp = bytes.Clone(stored), exp
	return d
}

// expires renders the expiry of a document version, "" for none.
func (d decoded) expires() string {
	if d.exp == 0 {
		return ""
	}
	return time.Unix(0, d.exp).UTC().Format(time.RFC3339Nano)
}

// cell renders d for a table: the value as JSON, or its hex when it did not
// decode.
func (d decoded) cell() string {
	if d.deleted {
		return "(deleted)"
	}
	if d.err != nil {
		return hexCell(d.raw) + " (neither msgpack nor JSON)"
	}
	if e := d.expires(); e != "" {
		return valueCell(d.value) + " (expires " + e + ")"
	}
	return valueCell(d.value)
}

// fields renders d for JSON: "value" (and "value_encoding": "json" when it
// was stored as JSON), "value_hex" and "value_error" when it did not
// decode, or "deleted": true for a delete marker.
func (d decoded) fields() object {
	if d.deleted {
		return object{{"deleted", true}}
	}
	if d.err != nil {
		return object{{"value_hex", hex.EncodeToString(d.raw)}, {"value_error", d.err.Error()}}
	}
	o := object{{"value", d.value}}
	if d.json {
		o = append(o, field{"value_encoding", "json"})
	}
	if e := d.expires(); e != "" {
		o = append(o, field{"expires", e})
	}
	return o
}

// size renders a byte count for people.
func size(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// positionTime renders a feed position (Unix nanoseconds) as a UTC time.
func positionTime(pos int64) string {
	return time.Unix(0, pos).UTC().Format(time.RFC3339Nano)
}
