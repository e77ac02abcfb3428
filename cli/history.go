package cli

import (
	"flag"
	"io"
	"strconv"

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
values decoded from msgpack or JSON (hex when a value is neither). With
--as-of V it starts at the version that was latest when version V was
written: the greatest version <= V.

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
		return func(c *ctx, args []string) int {
			if *n < 0 {
				return c.usagef("-n must be >= 0, not %d", *n)
			}
			if asOf.set && asOf.v < 1 {
				return c.usagef("--as-of must be >= 1, not %d", asOf.v)
			}
			return history(c, args[0], args[1], args[2], *n, asOf)
		}
	},
}

// historyView is a document's history, newest first, as history shows it.
type historyView struct {
	collection, id string
	latest         int64 // the document's latest version
	versions       []docVersion
}

// docVersion is one version of a document: a value, or a delete marker.
type docVersion struct {
	version int64
	deleted bool
	value   decoded
}

func history(c *ctx, dir, coll, id string, n int, asOf *optionalInt) int {
	s, code := c.openStore(dir, false)
	if s == nil {
		return code
	}
	defer s.close()
	v, err := fetchHistory(s, coll, id, n, asOf)
	if err != nil {
		return c.failed(err)
	}
	return c.show(v)
}

// fetchHistory reads document id of collection coll as package versioned
// reads it, with codec.Raw so that any value comes back: its latest
// version, then up to n versions (0: all) from the greatest version <=
// asOf when it is set, else from the latest. Expired versions (a TTL's)
// read as gone, as they do in History. A document with no version is a
// notFoundError.
func fetchHistory(s *store, coll, id string, n int, asOf *optionalInt) (*historyView, error) {
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
	for d, err := range c.History(id, q) {
		if err != nil {
			return nil, err
		}
		dv := docVersion{version: d.Version, deleted: d.Deleted}
		if !d.Deleted {
			dv.value = decode(d.Value)
		}
		v.versions = append(v.versions, dv)
	}
	return v, nil
}

func (v *historyView) json() object {
	list := []any{}
	for _, e := range v.versions {
		if e.deleted {
			list = append(list, object{{"version", e.version}, {"deleted", true}})
			continue
		}
		list = append(list, append(object{{"version", e.version}}, e.value.fields()...))
	}
	return object{{"collection", v.collection}, {"id", v.id}, {"latest", v.latest}, {"versions", list}}
}

func (v *historyView) table(w io.Writer) error {
	t := newTable(w, "VERSION", "VALUE")
	for _, e := range v.versions {
		if e.deleted {
			t.row(e.version, "(deleted)")
			continue
		}
		t.row(e.version, e.value.cell())
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
