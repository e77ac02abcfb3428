// Package check verifies a store's invariants, whatever the engine: every
// key fits its family, versions have no gap between the oldest kept and the
// latest, queue heads, tails, messages and dead letters agree, and
// (optionally) every value decodes. The command line tool's `check` and the
// tests (every conformance test ends with the store checked healthy) share
// it.
package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/engine"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/once"
	"github.com/tipkv/tipkv/internal/queuefmt"
	"github.com/vmihailenco/msgpack/v5"
)

// Options shape a check.
type Options struct {
	// Values also checks that every document, event and message payload
	// decodes as msgpack or JSON (a document version may also be a delete
	// marker), except under the names in Raw, and that no document version
	// of a store of the current format starts with the byte C1 unless it
	// is a delete marker, an escape or an expiry header (whatever the
	// codec).
	Values bool
	// Raw names collections, streams and queues whose values use another
	// codec.
	Raw map[string]bool
	// Max is how many problems the report lists (all are counted). The
	// default (0) is 100; negative lists none.
	Max int
	// FormatVersion is the newest store format the caller reads. The
	// default (0) accepts any.
	FormatVersion int
}

// Problem is one broken invariant.
type Problem struct {
	Kind   string // key, value, format, versions, queue, index, read
	Key    []byte // the key at fault; nil for a read that failed
	Where  string // the family being read, for a read problem
	Detail string
}

func (p Problem) String() string {
	if p.Key == nil {
		return fmt.Sprintf("%s (%s): %s", p.Kind, p.Where, p.Detail)
	}
	return fmt.Sprintf("%s at key %x: %s", p.Kind, p.Key, p.Detail)
}

// Report is what a check found.
type Report struct {
	Keys, Documents, Events, Messages uint64
	Count                             int // problems found, listed or not
	Problems                          []Problem
}

// Healthy reports whether no problem was found.
func (r Report) Healthy() bool { return r.Count == 0 }

// Err returns nil when healthy, or an error listing the problems.
func (r Report) Err() error {
	if r.Healthy() {
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "tipkv: store unhealthy: %d problem(s)", r.Count)
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	return errors.New(b.String())
}

// Range is a range of keys check reads at once, [Lo, Hi): the keys of one
// family, or ("other") keys of no family.
type Range struct {
	Name   string
	Family codec.Family
	Known  bool // Family is a family in use; false for "other"
	Lo, Hi []byte
}

// Ranges splits codec.Keyspace into the range of each family of
// codec.Families, [f, f+1), in key order, and the ranges between and after
// them that no family uses, each named "other": a read of each reads every
// key that a read of the keyspace reads. check reads one range at a time,
// so that a read error in one does not hide the others; the command line
// tool's stats and compact walk them too.
func Ranges() []Range {
	lo, end := codec.Keyspace()
	var out []Range
	for _, l := range codec.Families() {
		flo, fhi := []byte{byte(l.Family)}, []byte{byte(l.Family) + 1}
		if bytes.Compare(lo, flo) < 0 {
			out = append(out, Range{Name: "other", Lo: lo, Hi: flo})
		}
		out = append(out, Range{Name: l.Name, Family: l.Family, Known: true, Lo: flo, Hi: fhi})
		lo = fhi
	}
	return append(out, Range{Name: "other", Lo: lo, Hi: end})
}

type deadLetter struct {
	queue string
	seq   int64
}

type checker struct {
	o   Options
	r   engine.Reader
	rep Report

	sawFormat   bool
	fm          docfmt.Rules // how document versions read: by the store's format
	prevDoc     []byte
	prevVersion int64
	gapShown    bool
	heads       map[string]int64 // queue name -> stored head
	counts      map[string]queuefmt.State
	dead        []deadLetter
	prevLease   []byte // the prefix (stream, group) of the last lease key
	// The collection of the last time index state key, and whether its
	// index is on (see timeindex.go).
	indexColl string
	indexOn   bool
}

// Store checks the store r reads.
func Store(r engine.Reader, o Options) Report {
	if o.Max == 0 {
		o.Max = 100
	}
	if o.Max < 0 {
		o.Max = 0
	}
	ck := &checker{o: o, r: r, heads: map[string]int64{}, counts: map[string]queuefmt.State{}}
	metaRead := true
	for _, r := range Ranges() {
		if err := ck.scan(r); err != nil {
			ck.readFailed(r.Name, err)
			metaRead = metaRead && !(r.Known && r.Family == codec.FamilyMeta)
		}
	}
	if !ck.sawFormat && metaRead {
		ck.add("format", codec.AppendString(codec.AppendFamily(nil, codec.FamilyMeta), "format"), "no format key")
	}
	ck.queues()
	return ck.rep
}

func (ck *checker) add(kind string, key []byte, format string, args ...any) {
	ck.rep.Count++
	if len(ck.rep.Problems) < ck.o.Max {
		ck.rep.Problems = append(ck.rep.Problems, Problem{Kind: kind, Key: bytes.Clone(key), Detail: fmt.Sprintf(format, args...)})
	}
}

func (ck *checker) readFailed(where string, err error) {
	ck.rep.Count++
	if len(ck.rep.Problems) < ck.o.Max {
		ck.rep.Problems = append(ck.rep.Problems, Problem{Kind: "read", Where: where, Detail: err.Error()})
	}
}

func (ck *checker) scan(r Range) (err error) {
	it, err := ck.r.NewIter(r.Lo, r.Hi)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return err
		}
		ck.rep.Keys++
		ck.safeVisit(r, it.Key(), v)
	}
	return it.Error()
}

// safeVisit is visit that turns a panic on a hostile key or value into a
// problem: check reports what it cannot read, never crashes.
func (ck *checker) safeVisit(r Range, k, v []byte) {
	defer func() {
		if r := recover(); r != nil {
			ck.add("value", k, "decoding failed: %v", r)
		}
	}()
	ck.visit(r, k, v)
}

func (ck *checker) visit(r Range, k, v []byte) {
	l, ok := r.Family.Layout()
	if !r.Known || !ok {
		ck.add("key", k, "unknown family 0x%02x", k[0])
		return
	}
	name, rest, err := codec.DecodeString(k[1:])
	if err != nil {
		ck.add("key", k, "bad %s segment: %v", l.Segments[0], err)
		return
	}
	switch l.Family {
	case codec.FamilyMeta:
		if len(rest) != 0 {
			ck.add("key", k, "%d bytes after the name", len(rest))
		}
		if name == "format" {
			ck.sawFormat = true
			n, err := strconv.Atoi(string(v))
			switch {
			case err != nil:
				ck.add("format", k, "format key holds %q", v)
			case ck.o.FormatVersion > 0 && n > ck.o.FormatVersion:
				ck.add("format", k, "store format %d is newer than this tipkv's %d", n, ck.o.FormatVersion)
			default:
				ck.fm = docfmt.RulesOf(n)
			}
		}
		if name == "upgrade" {
			ck.add("format", k, "an upgrade of the store's format is unfinished (%q): open the store for writing to finish it", v)
		}
	case codec.FamilyVersions:
		ck.version(k, name, rest, v)
	case codec.FamilyFeed:
		if bytes.Equal(rest, feedMarkSuffix) {
			ck.feedMark(k, name, v)
			return
		}
		ck.rep.Events++
		ck.numbered(k, name, rest, "position", false)
		ev, meta := ck.fm.ParseEvent(v)
		if ck.fm.Current() && !docfmt.CanonicalEvent(v) {
			ck.add("value", k, "an event value that starts with C1 in a form the format never writes")
		}
		if meta != nil {
			if _, err := docfmt.ParseMeta(meta); err != nil {
				ck.add("value", k, "event metadata does not decode: %v", err)
			}
		}
		if ck.o.Values && !ck.o.Raw[name] {
			ck.payload(k, ev)
		}
	case codec.FamilyFeedCursors:
		ck.feedCursor(k, name, rest, v)
	case codec.FamilyOnce, codec.FamilyOnceDue, codec.FamilyOnceSeqs:
		ck.onceKey(l.Family, k, name, rest, v)
	case codec.FamilyFeedLeases:
		ck.feedLease(k, name, rest, v)
	case codec.FamilyPurges:
		if _, ok := ck.numbered(k, name, rest, "time", false); ok && len(v) != 0 {
			ck.add("value", k, "purge horizon with a %d-byte value, want none", len(v))
		}
	case codec.FamilyTimeIndex:
		ck.timeIndex(k, name, rest, v)
	case codec.FamilyQueueState:
		if len(rest) != 0 {
			ck.add("key", k, "%d bytes after the queue name", len(rest))
		}
		st, err := queuefmt.ParseState(v)
		if err != nil {
			ck.add("value", k, "queue state: %v", err)
			return
		}
		ck.heads[name] = st.Head
		if st.Counted {
			ck.counts[name] = st
		}
		if st.Head > st.Tail {
			ck.add("queue", k, "head %d is past tail %d", st.Head, st.Tail)
		}
	case codec.FamilyQueueControl:
		if name == "" {
			ck.add("key", k, "empty queue name")
		}
		if len(rest) != 0 {
			ck.add("key", k, "%d bytes after the queue name", len(rest))
		}
		if _, err := queuefmt.ParseControl(v); err != nil {
			ck.add("value", k, "queue control: %v", err)
		}
	case codec.FamilyQueueItems, codec.FamilyDeadLetters:
		ck.rep.Messages++
		seq, ok := ck.numbered(k, name, rest, "sequence number", true)
		tag := byte(queuefmt.ItemFormat)
		if l.Family == codec.FamilyDeadLetters {
			tag = queuefmt.DeadFormat
			if ok {
				ck.dead = append(ck.dead, deadLetter{name, seq})
			}
			if len(v) > 0 && v[0] == queuefmt.DeadRawFormat {
				// The bytes of an item that was corrupt, kept as they were:
				// damage that happened, though the queue goes on.
				ck.add("value", k, "a corrupt queue message, quarantined")
				return
			}
		}
		h, payload, err := queuefmt.ParseHeader(v, tag)
		if l.Family == codec.FamilyQueueItems {
			h, _, payload, err = queuefmt.ParseItem(v) // leased (on a shared engine) or not
		}
		if err != nil {
			ck.add("value", k, "queue value: %v", err)
			return
		}
		if h.Meta != nil {
			if _, err := docfmt.ParseMeta(h.Meta); err != nil {
				ck.add("value", k, "queue message metadata: %v", err)
			}
		}
		if ck.o.Values && !ck.o.Raw[name] {
			ck.payload(k, payload)
		}
	}
}

// feedMarkSuffix is desc(0), the number of a stream's trim mark: the
// key 04 | stream | desc(0) holds no event but asc(mark), the cut of the
// trim that dropped the stream's newest event (versioned's feed_mark.go).
var feedMarkSuffix = codec.AppendDesc(nil, 0)

// feedMark checks a stream's trim mark: a non-empty stream name and an
// 8-byte position of at least 1.
func (ck *checker) feedMark(k []byte, stream string, v []byte) {
	if stream == "" {
		ck.add("key", k, "empty name")
	}
	if len(v) != codec.NumberSize {
		ck.add("value", k, "trim mark of %d bytes, want %d", len(v), codec.NumberSize)
		return
	}
	if n, _, err := codec.DecodeAsc(v); err != nil || n < 1 {
		ck.add("value", k, "trim mark %d: want a position of at least 1 (%v)", n, err)
	}
}

// feedCursor checks a group's cursor: 06 | stream | group -> asc(position),
// both names non-empty, the position 8 bytes and not negative.
func (ck *checker) feedCursor(k []byte, stream string, rest, v []byte) {
	group, tail, err := codec.DecodeString(rest)
	switch {
	case err != nil:
		ck.add("key", k, "bad group segment: %v", err)
		return
	case stream == "" || group == "":
		ck.add("key", k, "empty stream or group name")
	case len(tail) != 0:
		ck.add("key", k, "%d bytes after the group name", len(tail))
	}
	if len(v) != codec.NumberSize {
		ck.add("value", k, "cursor of %d bytes, want %d", len(v), codec.NumberSize)
		return
	}
	if n, _, err := codec.DecodeAsc(v); err != nil || n < 0 {
		ck.add("value", k, "cursor position %d: %v", n, err)
	}
}

// onceKey checks the keys of idempotency keys (package internal/once):
// a record's key and value, a due entry's key, a seq entry's number.
func (ck *checker) onceKey(f codec.Family, k []byte, first string, rest, v []byte) {
	switch f {
	case codec.FamilyOnce:
		name, tail, err := codec.DecodeString(rest)
		var key string
		if err == nil {
			key, tail, err = codec.DecodeString(tail)
		}
		switch {
		case err != nil:
			ck.add("key", k, "bad idempotency key segment: %v", err)
		case name == "" || key == "" || len(tail) != 0:
			ck.add("key", k, "an idempotency record needs a name and a key, and nothing after")
		}
		if _, err := once.Parse(v); err != nil {
			ck.add("value", k, "%v", err)
		}
	case codec.FamilyOnceDue:
		if _, _, _, _, err := once.ParseDueKey(k); err != nil {
			ck.add("key", k, "%v", err)
		}
	case codec.FamilyOnceSeqs:
		ck.numbered(k, first, rest, "sequence number", true)
	}
}

// feedLease checks the lease of a consumer group's member (versioned's
// leases.go): 0A | stream | group | asc(epoch) -> asc(deadline) | member,
// epoch >= 1, deadline >= 0, a member name of 1 to 256 bytes, and one
// lease key per group (a takeover deletes the old epoch's key in the
// batch that writes the new one).
func (ck *checker) feedLease(k []byte, stream string, rest, v []byte) {
	group, tail, err := codec.DecodeString(rest)
	if err != nil {
		ck.add("key", k, "bad group segment: %v", err)
		return
	}
	if group == "" {
		ck.add("key", k, "empty group name")
	}
	if _, ok := ck.numbered(k, stream, tail, "epoch", true); !ok {
		return
	}
	prefix := k[:len(k)-codec.NumberSize]
	if bytes.Equal(prefix, ck.prevLease) {
		ck.add("key", k, "a second lease key of stream %q, group %q", stream, group)
	}
	ck.prevLease = append(ck.prevLease[:0], prefix...)
	if len(v) <= codec.NumberSize || len(v) > codec.NumberSize+256 {
		ck.add("value", k, "lease of %d bytes, want %d and a member name of 1 to 256", len(v), codec.NumberSize)
		return
	}
	if d, _, _ := codec.DecodeAsc(v); d < 0 {
		ck.add("value", k, "lease deadline %d", d)
	}
}

// numbered checks the number after a name: 8 bytes, at least 1.
func (ck *checker) numbered(k []byte, name string, rest []byte, what string, asc bool) (int64, bool) {
	if name == "" {
		ck.add("key", k, "empty name")
	}
	if len(rest) != codec.NumberSize {
		ck.add("key", k, "a %s needs %d bytes, the key has %d", what, codec.NumberSize, len(rest))
		return 0, false
	}
	var n int64
	if asc {
		n, _, _ = codec.DecodeAsc(rest)
	} else {
		n, _, _ = codec.DecodeDesc(rest)
	}
	if n < 1 {
		kind := "key"
		if what == "version" {
			kind = "versions"
		}
		ck.add(kind, k, "%s %d is below 1", what, n)
		return n, false
	}
	return n, true
}

// version checks one version key; keys come in order, so a document's
// versions arrive newest first, one after the other.
func (ck *checker) version(k []byte, coll string, rest, v []byte) {
	id, tail, err := codec.DecodeString(rest)
	if err != nil {
		ck.add("key", k, "bad id segment: %v", err)
		return
	}
	if coll == "" || id == "" {
		ck.add("key", k, "empty collection name or document id")
	}
	n, ok := ck.numbered(k, coll, tail, "version", false)
	if !ok {
		return
	}
	doc := k[:len(k)-codec.NumberSize]
	same := string(doc) == string(ck.prevDoc)
	if !same {
		ck.rep.Documents++
		ck.prevDoc = bytes.Clone(doc)
		ck.gapShown = false
	} else if n != ck.prevVersion-1 && !ck.gapShown {
		ck.gapShown = true
		missing := strconv.FormatInt(n+1, 10)
		if ck.prevVersion-n > 2 {
			missing = fmt.Sprintf("%d to %d", n+1, ck.prevVersion-1)
		}
		ck.add("versions", k, "versions %d then %d: %s missing", ck.prevVersion, n, missing)
	}
	ck.prevVersion = n
	if ck.o.Values && ck.fm.Current() && !docfmt.Canonical(v) {
		ck.add("value", k, "starts with the byte c1 but is no version header, delete marker, escape or expiry header: it was stored by format 2, and the store was upgraded to format 3 without escaping it (as tipkv did until issue 24 was fixed), so its values of format 2 that start with c1 00 or c1 01 may read differently than they were written")
	}
	if ck.o.Values {
		if meta := ck.fm.Parse(v).Meta; meta != nil {
			if _, err := docfmt.ParseMeta(meta); err != nil {
				ck.add("value", k, "its metadata does not decode: %v", err)
			}
		}
	}
	if ck.o.Values && !ck.o.Raw[coll] && !ck.fm.IsDeleteMarker(v) {
		doc, _ := ck.fm.Split(v)
		ck.payload(k, doc)
	}
}

// payload checks that v decodes as msgpack (one value, nothing after it)
// or is JSON.
func (ck *checker) payload(k, v []byte) {
	if json.Valid(v) {
		return
	}
	d := msgpack.NewDecoder(bytes.NewReader(v))
	if _, err := d.DecodeInterface(); err != nil {
		ck.add("value", k, "not msgpack: %v", err)
		return
	}
	if n := d.Buffered().(*bytes.Reader).Len(); n > 0 {
		ck.add("value", k, "not msgpack: %d bytes left after the msgpack value", n)
	}
}

// queues checks, after the scan, that no message lies below its queue's
// stored head (consumed messages are deleted), that a stored count is
// right, and that no sequence number
// is both a message and a dead letter (a dead letter keeps its number,
// which is never reused).
func (ck *checker) queues() {
	for name, head := range ck.heads {
		lo := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), name)
		hi := codec.AppendAsc(bytes.Clone(lo), head)
		it, err := ck.r.NewIter(lo, hi)
		if err != nil {
			ck.readFailed("queue-items", err)
			continue
		}
		for ok := it.First(); ok; ok = it.Next() {
			ck.add("queue", it.Key(), "message below the queue's head %d: consumed messages must be deleted", head)
		}
		if err := it.Error(); err != nil {
			ck.readFailed("queue-items", err)
		}
		_ = it.Close()
	}
	// A counted state's count is the number of messages below its end; a
	// run state's, less the run consumed since it was written: the numbers
	// from its head to the first message (see package queuefmt).
	for name, st := range ck.counts {
		lo := codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), name)
		hi := codec.AppendAsc(bytes.Clone(lo), st.CountTo)
		lo = codec.AppendAsc(lo, st.Head)
		it, err := ck.r.NewIter(lo, hi)
		if err != nil {
			ck.readFailed("queue-items", err)
			continue
		}
		var n int64
		first := st.CountTo
		for ok := it.First(); ok; ok = it.Next() {
			if n == 0 {
				if seq, _, err := codec.DecodeAsc(it.Key()[len(lo)-codec.NumberSize:]); err == nil {
					first = seq
				}
			}
			n++
		}
		want, run := st.Count, ""
		if st.Run {
			want = max(want-(first-st.Head), 0)
			run = fmt.Sprintf(" (%d without the run consumed since)", want)
		}
		if err := it.Error(); err != nil {
			ck.readFailed("queue-items", err)
		} else if n != want {
			ck.add("queue", codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueState), name), "the state counts %d messages below %d%s, the queue holds %d", st.Count, st.CountTo, run, n)
		}
		_ = it.Close()
	}
	for _, d := range ck.dead {
		key := codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyQueueItems), d.queue), d.seq)
		_, err := ck.r.Get(key)
		switch {
		case err == nil:
			dead := codec.AppendAsc(codec.AppendString(codec.AppendFamily(nil, codec.FamilyDeadLetters), d.queue), d.seq)
			ck.add("queue", dead, "sequence number %d is both a message and a dead letter", d.seq)
		case !errors.Is(err, engine.ErrNotFound):
			ck.readFailed("queue-items", err)
		}
	}
}
