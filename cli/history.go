package cli

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

var historyCommand = &command{
	name:    "history",
	args:    []string{"DIR", "COLLECTION", "ID"},
	summary: "show the versions of one document, newest first",
	help: `
Shows the versions of document ID in COLLECTION, newest first, with their
values decoded from msgpack or JSON (hex when a value is neither), their
commit times (store format 4 on; "-" for a version written before), and the
author and reason of the versions written with metadata (--json gives the
whole metadata). With --as-of V it starts at the version that was latest
when version V was written: the greatest version <= V. With --at TIME
(RFC 3339) it starts at the version that was latest at TIME
(Collection.AsOfTime).

A deleted document shows its history, the newest version being the delete
marker, shown as (deleted) ("deleted": true with --json). The versions are
those Collection.History reads: a version whose time to live (Options.TTL)
has passed reads as gone, though it stays on disk until it is purged
(tipkv dump shows it, and its expiry). Exits 1 when the document has no
versions (it never existed, was purged, or every version expired); an
--as-of older than every kept version shows nothing and exits 0.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		n := fs.Int("n", 10, "show at most `N` versions; 0 shows all")
		asOf := optInt(fs, "as-of", "start at the greatest version <= `V`")
		at := fs.String("at", "", "start at the version latest at `TIME` (RFC 3339)")
		return func(c *ctx, args []string) int {
			if *n < 0 {
				return c.usagef("-n must be >= 0, not %d", *n)
			}
			if asOf.set && asOf.v < 1 {
				return c.usagef("--as-of must be >= 1, not %d", asOf.v)
			}
			var when time.Time
			if *at != "" {
				if asOf.set {
					return c.usagef("--at and --as-of exclude each other")
				}
				var err error
				if when, err = time.Parse(time.RFC3339Nano, *at); err != nil {
					return c.usagef("--at: %v", err)
				}
			}
			return history(c, args[0], args[1], args[2], *n, asOf, when)
		}
	},
}

// historyView is a document's history, newest first, as history shows it.
type historyView struct {
	collection, id string
	latest         int64 // the document's latest version
	versions       []docVersion
}

// docVersion is one version of a document: a value, or a delete marker,
// with its commit time (zero before format 4) and metadata.
type docVersion struct {
	version int64
	deleted bool
	value   decoded
	time    time.Time
	meta    *tipkv.Metadata // nil: written without
	metaErr error
}

func history(c *ctx, dir, coll, id string, n int, asOf *optionalInt, at time.Time) int {
	s, code := c.openStore(dir, false)
	if s == nil {
		return code
	}
	defer s.close()
	v, err := fetchHistory(s, coll, id, n, asOf, at)
	if err != nil {
		return c.failed(err)
	}
	return c.show(v)
}

// fetchHistory reads document id of collection coll as package versioned
// reads it, with codec.Raw so that any value comes back: its latest
// version, then up to n versions (0: all) from the greatest version <=
// asOf when it is set, from the version latest at at when it is not zero
// (ErrUntimed when that is among versions without a commit time), else
// from the latest. Expired versions (a TTL's)
// read as gone, as they do in History. A document with no version is a
// notFoundError.
func fetchHistory(s *store, coll, id string, n int, asOf *optionalInt, at time.Time) (*historyView, error) {
	c, err := versioned.NewCollection(s.db, coll, &versioned.Options[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		return nil, err
	}
	v := &historyView{collection: coll, id: id}
	found := false
	for d, err := range c.History(id, tipkv.Query{Limit: 1}) {
		if err != nil {
			return nil, err
		}
		v.latest, found = d.Version, true
	}
	if !found {
		return nil, notFoundf("collection %q has no document %q", coll, id)
	}
	q := tipkv.Query{Limit: n}
	if asOf.set {
		q.To = asOf.v
	}
	if !at.IsZero() {
		q.Limit = 0 // the versions after at are passed over below
	}
	for d, err := range c.History(id, q) {
		if err != nil {
			return nil, err
		}
		if !at.IsZero() && len(v.versions) == 0 {
			if d.Untimed() {
				return nil, fmt.Errorf("%w: version %d of %q was written before commit times: what was latest at %s is unknown", tipkv.ErrUntimed, d.Version, id, at.Format(time.RFC3339Nano))
			}
			if d.Time.After(at) {
				continue
			}
		}
		if n > 0 && len(v.versions) == n {
			break
		}
		dv := docVersion{version: d.Version, deleted: d.Deleted, time: d.Time}
		if !d.Deleted {
			dv.value = decode(d.Value)
		}
		if d.HasMetadata() {
			m, err := d.Metadata()
			dv.meta, dv.metaErr = &m, err
		}
		v.versions = append(v.versions, dv)
	}
	return v, nil
}

// metaObject renders metadata for JSON, or the error it did not decode
// with.
func (e docVersion) metaObject() object {
	if e.metaErr != nil {
		return object{{"error", e.metaErr.Error()}}
	}
	m := e.meta
	o := object{}
	for _, f := range []field{{"author", m.Author}, {"reason", m.Reason}, {"correlation_id", m.CorrelationID}, {"causation_id", m.CausationID}} {
		if f.value != "" {
			o = append(o, f)
		}
	}
	if len(m.Headers) > 0 {
		o = append(o, field{"headers", m.Headers})
	}
	return o
}

// timeCell renders a commit time for a table: "-" for none.
func timeCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (v *historyView) json() object {
	list := []any{}
	for _, e := range v.versions {
		o := object{{"version", e.version}}
		if !e.time.IsZero() {
			o = append(o, field{"time", e.time.UTC().Format(time.RFC3339Nano)})
		}
		if e.meta != nil || e.metaErr != nil {
			o = append(o, field{"meta", e.metaObject()})
		}
		if e.deleted {
			list = append(list, append(o, field{"deleted", true}))
			continue
		}
		list = append(list, append(o, e.value.fields()...))
	}
	return object{{"collection", v.collection}, {"id", v.id}, {"latest", v.latest}, {"versions", list}}
}

// table shows TIME when a version shown has one, and AUTHOR and REASON
// when one has metadata.
func (v *historyView) table(w io.Writer) error {
	timed, withMeta := false, false
	for _, e := range v.versions {
		timed = timed || !e.time.IsZero()
		withMeta = withMeta || e.meta != nil
	}
	head := []string{"VERSION"}
	if timed {
		head = append(head, "TIME")
	}
	if withMeta {
		head = append(head, "AUTHOR", "REASON")
	}
	t := newTable(w, append(head, "VALUE")...)
	for _, e := range v.versions {
		row := []any{e.version}
		if timed {
			row = append(row, timeCell(e.time))
		}
		if withMeta {
			var m tipkv.Metadata
			if e.meta != nil {
				m = *e.meta
			}
			row = append(row, orDash(m.Author), orDash(m.Reason))
		}
		if e.deleted {
			t.row(append(row, "(deleted)")...)
			continue
		}
		t.row(append(row, e.value.cell())...)
	}
	return t.flush()
}

// optionalInt is an int64 flag that knows whether it was given.
type optionalInt struct {
	v   int64
	set bool
}

func optInt(fs *flag.FlagSet, name, usage string) *optionalInt {
	o := &optionalInt{}
	fs.Func(name, usage, func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		o.v, o.set = v, true
		return nil
	})
	return o
}
