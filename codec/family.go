package codec

import (
	"bytes"
	"fmt"
	"slices"
)

// Family is the first byte of every key: which kind of record it is. The
// package doc's "Families" table lists them; [Families] is that table in
// Go.
type Family byte

// The key families. A family number is never reused.
const (
	FamilyMeta         Family = 0x00 // 00 | name
	FamilyVersions     Family = 0x01 // 01 | collection | id | desc(version)
	FamilyQueueItems   Family = 0x02 // 02 | queue | asc(seq)
	FamilyQueueState   Family = 0x03 // 03 | queue
	FamilyFeed         Family = 0x04 // 04 | stream | desc(position)
	FamilyDeadLetters  Family = 0x05 // 05 | queue | asc(seq)
	FamilyFeedCursors  Family = 0x06 // 06 | stream | group
	FamilyOnce         Family = 0x07 // 07 | space | name | key
	FamilyOnceDue      Family = 0x08 // 08 | due | space | name | key
	FamilyOnceSeqs     Family = 0x09 // 09 | queue | asc(seq)
	FamilyFeedLeases   Family = 0x0A // 0A | stream | group | asc(epoch)
	FamilyPurges       Family = 0x0B // 0B | collection | desc(time)
	FamilyQueueControl Family = 0x0C // 0C | queue
	FamilyTimeIndex    Family = 0x0D // 0D | collection | id | desc(time)
)

// Layout is the shape of one family's keys: the family byte, then escaped
// segments, then, in the families that have one, a number of
// [NumberSize] bytes. A key of a family ends there: nothing follows.
type Layout struct {
	Family Family
	// Name names the family for people and tools ("queue-items"): tipkv
	// dump, stats, check and compact print it, and --family takes it.
	Name string
	// Segments names the segments, in key order ("collection", "id").
	Segments []string
	// Number names the trailing number ("version"), or is "" when the
	// key ends with its last segment.
	Number string
	// Desc says the number is desc(n), so that the newest sorts first;
	// otherwise it is asc(n).
	Desc bool
}

// Numbered reports whether the family's keys end in a number: then
// [Split] puts the segments in the prefix and the number in the suffix.
func (l Layout) Numbered() bool { return l.Number != "" }

// families is the table the package doc draws, in byte order. Split,
// Families, Family.Layout and every tool that walks the key space read
// it; the golden vectors in testdata pin it.
var families = []Layout{
	{Family: FamilyMeta, Name: "meta", Segments: []string{"name"}},
	{Family: FamilyVersions, Name: "versions", Segments: []string{"collection", "id"}, Number: "version", Desc: true},
	{Family: FamilyQueueItems, Name: "queue-items", Segments: []string{"queue"}, Number: "seq"},
	{Family: FamilyQueueState, Name: "queue-state", Segments: []string{"queue"}},
	{Family: FamilyFeed, Name: "feed", Segments: []string{"stream"}, Number: "position", Desc: true},
	{Family: FamilyDeadLetters, Name: "dead-letters", Segments: []string{"queue"}, Number: "seq"},
	{Family: FamilyFeedCursors, Name: "feed-cursors", Segments: []string{"stream", "group"}},
	// Idempotency keys (package internal/once): the record of a key, the
	// index of windowed keys by when they end (due is a segment holding
	// asc(Unix ns), so that the sweep walks them in time order), and the
	// index of a queue's until-done keys by sequence number.
	{Family: FamilyOnce, Name: "once", Segments: []string{"space", "name", "key"}},
	{Family: FamilyOnceDue, Name: "once-due", Segments: []string{"due", "space", "name", "key"}},
	{Family: FamilyOnceSeqs, Name: "once-seqs", Segments: []string{"queue"}, Number: "seq"},
	{Family: FamilyFeedLeases, Name: "feed-leases", Segments: []string{"stream", "group"}, Number: "epoch"},
	// The purge horizon of a collection (package versioned): the time
	// from which its reads by time are exact after whole documents were
	// purged, newest first.
	{Family: FamilyPurges, Name: "purges", Segments: []string{"collection"}, Number: "time", Desc: true},
	// A queue's pause and its cap on messages in flight (package queue).
	{Family: FamilyQueueControl, Name: "queue-control", Segments: []string{"queue"}},
	// The time index of a collection that has one (package versioned):
	// a document's versions by commit time, newest first, each key's
	// value the version; the key with the empty id (no document has
	// one) holds the index's state.
	{Family: FamilyTimeIndex, Name: "time-index", Segments: []string{"collection", "id"}, Number: "time", Desc: true},
}

// segmentsBefore[b] is how many segments come before the trailing number
// in the keys of family b, or -1 when b is reserved or its keys have no
// number: Split's lookup, one load per key.
var segmentsBefore = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for _, l := range families {
		if l.Numbered() {
			t[l.Family] = int8(len(l.Segments))
		}
	}
	return t
}()

// Families returns the layout of every family in use, in byte order. The
// bytes between and after them, up to 0xFE, are reserved for families to
// come; 0xFF is never a family (see [Keyspace]). The result is a copy.
func Families() []Layout {
	out := slices.Clone(families)
	for i := range out {
		out[i].Segments = slices.Clone(out[i].Segments)
	}
	return out
}

// Layout returns the layout of family f, and false when f is reserved: no
// key of tipkv starts with it.
func (f Family) Layout() (Layout, bool) {
	for _, l := range families {
		if l.Family == f {
			l.Segments = slices.Clone(l.Segments)
			return l, true
		}
	}
	return Layout{}, false
}

// String returns the family's name ("versions"), or its byte in hex
// ("0x09") when it is reserved.
func (f Family) String() string {
	for _, l := range families {
		if l.Family == f {
			return l.Name
		}
	}
	return fmt.Sprintf("0x%02x", byte(f))
}

// keyspaceEndSize is how many 0xFF bytes make the keyspace's upper bound.
const keyspaceEndSize = 64

// Keyspace returns the bounds of a walk over the whole store, [lo, hi) =
// [00, FF FF ... FF) with 64 FF bytes: every key tipkv writes lies inside
// (its family byte is below 0xFF), and so does every other key but the
// empty one and those that start with 64 FF bytes. Every walk or
// compaction of the whole store uses these bounds. (The lower bound is not
// the empty key: Pebble's invariant checks, on in race builds, read the
// first byte of a seek key.) The slices are new.
func Keyspace() (lo, hi []byte) {
	return []byte{0x00}, bytes.Repeat([]byte{0xFF}, keyspaceEndSize)
}
