package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/docfmt"
	"github.com/tipkv/tipkv/internal/storage"
)

func qItemKey(name string, seq int64) []byte {
	return codec.AppendAsc(segPrefix(codec.FamilyQueueItems, name), seq)
}

var checkCommand = &command{
	name:    "check",
	args:    []string{"DIR"},
	summary: "verify keys, values, version density and queue state; exit 1 if unhealthy",
	help: `
Reads every key once and verifies that:

  - every key has its family's layout (keys of other families, or that do
    not decode, are problems);
  - the format key exists and names a format this tipkv reads;
  - every document's versions are >= 1 and dense: no gap between the oldest
    kept version and the latest (Prune and PruneBefore drop the oldest
    versions, so versions may start above 1; a delete marker is a version);
  - every document version, feed event, queue message and dead letter
    decodes as msgpack or JSON (skip that for collections, streams or
    queues that use another codec with --raw), a document version being
    also allowed to be a delete marker (the single byte c1), and every
    queue header and
    queue state parses;
  - no queue message lies below its queue's head (consumed messages are
    deleted), no head is past its tail, sequence numbers are >= 1, and no
    sequence number is both a message and a dead letter.

A store check cannot read is unhealthy too: a read that fails (a corrupt
sstable block, a missing file) is a problem of kind read, naming the
family it was reading and the error, and check goes on with the next
family; a store that does not open because its data is corrupt is
reported the same way.

Exit status 0 means healthy, 1 means problems were found (they are listed),
2 means bad usage or the store could not be opened for another reason (it
is missing, in use, or not a tipkv store).`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		raw := fs.String("raw", "", "comma-separated `NAMES` of collections, streams or queues whose values are neither msgpack nor JSON")
		max := fs.Int("max", 100, "list at most `N` problems (all are counted)")
		return func(c *ctx, args []string) int {
			if *max < 0 {
				return c.usagef("--max must be >= 0, not %d", *max)
			}
			names := map[string]bool{}
			for _, n := range strings.Split(*raw, ",") {
				if n != "" {
					names[n] = true
				}
			}
			return check(c, args[0], names, *max)
		}
	},
}

type problem struct {
	kind   string // key, value, format, versions, queue, read
	key    key    // raw is nil for a problem of no single key (read)
	where  string // for a read problem: the key range being read
	detail string
}

type checker struct {
	raw      map[string]bool
	max      int
	problems []problem
	count    int
	keys     uint64

	docs        uint64
	events      uint64
	messages    uint64
	sawFormat   bool
	prevDoc     []byte // collection and id segments of the previous version key
	prevVersion int64
	gapShown    bool
	queueHeads  map[string]int64
	deadKeys    []key // checked against the items after the scan
}

func (ck *checker) add(kind string, k key, format string, args ...any) {
	ck.count++
	if len(ck.problems) < ck.max {
		ck.problems = append(ck.problems, problem{kind: kind, key: k, detail: fmt.Sprintf(format, args...)})
	}
}

// readFailed records a read that failed while reading the keys of where
// (a family name, or "store" when the store did not open).
func (ck *checker) readFailed(where string, err error) {
	ck.count++
	if len(ck.problems) < ck.max {
		ck.problems = append(ck.problems, problem{kind: "read", where: where, detail: err.Error()})
	}
}

// safeVisit is visit that turns a panic while decoding a hostile key or
// value into a problem: check reports what it cannot read, never crashes.
func (ck *checker) safeVisit(k key, v []byte) {
	defer func() {
		if r := recover(); r != nil {
			ck.add("value", k, "decoding failed: %v", r)
		}
	}()
	ck.visit(k, v)
}

func (ck *checker) visit(k key, v []byte) {
	ck.keys++
	if !k.complete() {
		ck.add("key", k, "%s", k.bad)
		return
	}
	r := decodeRecord(k, v)
	if r.bad != "" {
		ck.add("value", k, "%s", r.bad)
	} else if r.msgpack && r.value.err != nil && !ck.raw[k.seg(0)] && !(k.fam.id == codec.FamilyVersions && docfmt.IsDeleteMarker(v)) {
		ck.add("value", k, "not msgpack: %v", r.value.err)
	}
	switch k.fam.id {
	case codec.FamilyMeta:
		if k.seg(0) == "format" {
			ck.sawFormat = true
			if n, err := strconv.Atoi(string(v)); err == nil && n > tipkv.FormatVersion {
				ck.add("format", k, "store format %d is newer than this tipkv's %d", n, tipkv.FormatVersion)
			}
		}
	case codec.FamilyVersions:
		ck.version(k)
	case codec.FamilyFeed:
		ck.events++
		if len(k.segs[0]) == 0 {
			ck.add("key", k, "empty stream name")
		}
	case codec.FamilyQueueState:
		if st, err := parseQueueState(v); err == nil {
			ck.queueHeads[k.seg(0)] = st.head
			if st.head > st.tail {
				ck.add("queue", k, "head %d is past tail %d", st.head, st.tail)
			}
		}
	case codec.FamilyQueueItems, codec.FamilyDeadLetters:
		ck.messages++
		if k.num < 1 {
			ck.add("queue", k, "sequence number %d is below 1", k.num)
		}
		if k.fam.id == codec.FamilyDeadLetters {
			ck.deadKeys = append(ck.deadKeys, k)
		}
		// The state key (03) sorts after the items (02) it describes, so
		// they are checked against it after the scan, and so are the dead
		// letters (05) against the items.
	}
}

// version checks one version key; keys come in order, so a document's
// versions arrive newest first, one after the other.
func (ck *checker) version(k key) {
	if len(k.segs[0]) == 0 || len(k.segs[1]) == 0 {
		ck.add("key", k, "empty collection name or document id")
	}
	doc := k.raw[:len(k.raw)-codec.NumberSize]
	same := string(doc) == string(ck.prevDoc)
	if !same {
		ck.docs++
		ck.prevDoc = doc
		ck.gapShown = false
	}
	if k.num < 1 {
		ck.add("versions", k, "version %d is below 1", k.num)
	} else if same && k.num != ck.prevVersion-1 && !ck.gapShown {
		ck.gapShown = true
		missing := fmt.Sprintf("%d", k.num+1)
		if ck.prevVersion-k.num > 2 {
			missing = fmt.Sprintf("%d to %d", k.num+1, ck.prevVersion-1)
		}
		ck.add("versions", k, "versions %d then %d: %s missing", ck.prevVersion, k.num, missing)
	}
	ck.prevVersion = k.num
}

func check(c *ctx, dir string, raw map[string]bool, max int) int {
	ck := &checker{raw: raw, max: max, queueHeads: map[string]int64{}}
	s, err := openStore(dir, false)
	switch {
	case errors.Is(err, tipkv.ErrCorrupt):
		// The store is there, and unreadable: that is check's verdict,
		// not a failure to run.
		ck.readFailed("store", err)
		return ck.report(c)
	case err != nil:
		return c.openFailed(dir, err)
	}
	defer s.close()

	// Family by family, so that a read error in one does not hide the
	// others.
	metaRead := true
	for _, r := range keyRanges() {
		err := s.scan(r.lo, r.hi, func(k, v []byte) error {
			ck.safeVisit(decodeKey(k), v)
			return nil
		})
		if err != nil {
			ck.readFailed(r.name, err)
			metaRead = metaRead && r.name != "meta"
		}
	}
	if !ck.sawFormat && metaRead {
		ck.add("format", decodeKey(codec.AppendString([]byte{byte(codec.FamilyMeta)}, "format")), "no format key")
	}
	// Queue items below their queue's head.
	for _, name := range slices.Sorted(maps.Keys(ck.queueHeads)) {
		head := ck.queueHeads[name]
		lo := segPrefix(codec.FamilyQueueItems, name)
		hi := codec.AppendAsc(append([]byte(nil), lo...), head)
		err := s.scan(lo, hi, func(k, _ []byte) error {
			ck.add("queue", decodeKey(k), "message below the queue's head %d: consumed messages must be deleted", head)
			return nil
		})
		if err != nil {
			ck.readFailed("queue-items", err)
		}
	}

	// A dead letter keeps its sequence number, which is never reused.
	for _, d := range ck.deadKeys {
		_, err := s.kv.Get(qItemKey(d.seg(0), d.num))
		switch {
		case err == nil:
			ck.add("queue", d, "sequence number %d is both a message and a dead letter", d.num)
		case !errors.Is(err, storage.ErrNotFound):
			ck.readFailed("queue-items", err)
		}
	}
	return ck.report(c)
}

// report writes the checker's verdict and returns the exit status: 0 when
// healthy, 1 when not.
func (ck *checker) report(c *ctx) int {
	var err error
	healthy := ck.count == 0
	if c.json {
		list := []any{}
		for _, p := range ck.problems {
			obj := object{{"kind", p.kind}}
			if p.key.raw == nil {
				obj = append(obj, field{"family", p.where})
			} else {
				obj = append(obj, p.key.fields()...)
				obj = append(obj, field{"key_hex", fmt.Sprintf("%x", p.key.raw)})
			}
			list = append(list, append(obj, field{"detail", p.detail}))
		}
		err = writeJSON(c.stdout, object{
			{"healthy", healthy}, {"keys", ck.keys}, {"documents", ck.docs}, {"events", ck.events},
			{"messages", ck.messages}, {"problem_count", ck.count}, {"problems", list},
		})
	} else {
		if len(ck.problems) > 0 {
			t := newTable(c.stdout, "PROBLEM", "FAMILY", "KEY", "DETAIL")
			for _, p := range ck.problems {
				if p.key.raw == nil {
					t.row(p.kind, p.where, "-", p.detail)
					continue
				}
				t.row(p.kind, familyName(p.key.raw0()), p.key.text(), p.detail)
			}
			err = t.flush()
			if ck.count > len(ck.problems) {
				fmt.Fprintf(c.stdout, "... and %d more (--max)\n", ck.count-len(ck.problems))
			}
		}
		verdict := "healthy"
		if !healthy {
			verdict = fmt.Sprintf("%d problem(s)", ck.count)
		}
		fmt.Fprintf(c.stdout, "checked %d keys (%d documents, %d events, %d queue messages): %s\n",
			ck.keys, ck.docs, ck.events, ck.messages, verdict)
	}
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	if !healthy {
		return exitFail
	}
	return exitOK
}
