package cli

import (
	"encoding/json"
	"flag"
	"iter"

	"github.com/tipkv/tipkv/codec"
)

var dumpCommand = &command{
	name:    "dump",
	args:    []string{"DIR"},
	summary: "list keys decoded into their parts, values as JSON",
	help: `
Lists the store's keys in key order, each decoded into its parts (family,
collection, id, version; stream, position; queue, seq; meta name), and each
value decoded from msgpack into JSON (a value stored as JSON, by
codec.JSON, is shown as it is). Queue items and dead letters show
their header (attempts, times) before the payload, queue states their head
and tail, feed cursors their position; a document version that is a
delete marker shows as (deleted) ("deleted": true with --json), one with a
time to live its expiry. A key tipkv did not write is shown in hex, and so
is a value that does not decode.

--family keeps one family, by its name or its number:

  ` + familyNames() + `

--prefix P keeps the keys whose name begins with P, in every family (or
the one --family names): the collection of a document version, the stream
of a feed event, the queue of a queue message, queue state or dead letter,
the name of a meta key. P is compared byte for byte with the start of the
name: case matters, there are no wildcards, and document ids are not
matched (tipkv history shows one document). "--prefix orders" keeps the
collection orders, a stream orders-audit and a queue orders-out alike.

--hex shows keys and values as raw hex in tables, and adds key_hex and
value_hex in JSON.

With --json, dump writes one JSON object per line (JSON Lines), so that a
large store streams. Tables cut long values; JSON never does.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		fam := fs.String("family", "", "only keys of family `F` (name or number)")
		prefix := fs.String("prefix", "", "only keys whose collection, stream, queue or meta name begins with `P`")
		rawHex := fs.Bool("hex", false, "show raw keys and values in hex")
		limit := fs.Int("n", 0, "stop after `N` keys; 0 shows all")
		return func(c *ctx, args []string) int {
			var only *codec.Layout
			if *fam != "" {
				var err error
				if only, err = lookupFamily(*fam); err != nil {
					return c.usagef("--family: %v", err)
				}
			}
			if *limit < 0 {
				return c.usagef("-n must be >= 0, not %d", *limit)
			}
			return dump(c, args[0], only, *prefix, *rawHex, *limit)
		}
	},
}

// dumpRanges returns the key ranges dump reads, in key order: the whole
// key space, one family, or the keys whose first segment begins with
// prefix in one or every family.
func dumpRanges(only *codec.Layout, prefix string, hasPrefix bool) [][2][]byte {
	var out [][2][]byte
	for _, f := range families {
		if only != nil && f.Family != only.Family {
			continue
		}
		lo, hi := familyRange(f.Family)
		if hasPrefix {
			lo, hi = namePrefix(f.Family, prefix)
		}
		out = append(out, [2][]byte{lo, hi})
	}
	if only == nil && !hasPrefix {
		// Everything, including keys of families tipkv does not write.
		lo, hi := codec.Keyspace()
		return [][2][]byte{{lo, hi}}
	}
	return out
}

func dump(c *ctx, dir string, only *codec.Layout, prefix string, rawHex bool, limit int) int {
	s, code := c.openStore(dir, false)
	if s == nil {
		return code
	}
	defer s.close()

	// The records stream: each is printed as it is read, so that a large
	// store needs no memory, and what was printed stays printed when a
	// read fails.
	var t *table
	var enc *json.Encoder
	if c.json {
		enc = json.NewEncoder(c.stdout)
		enc.SetEscapeHTML(false)
	} else {
		t = newTable(c.stdout, "FAMILY", "KEY", "VALUE")
	}
	for rec, err := range fetchRecords(s, only, prefix, limit) {
		if err == nil && enc != nil {
			err = enc.Encode(rec.fields(rawHex))
		}
		if err != nil {
			if t != nil {
				_ = t.flush()
			}
			return c.failf(exitFail, "%v", err)
		}
		if t != nil {
			t.row(rec.cells(rawHex)...)
		}
	}
	if t != nil {
		if err := t.flush(); err != nil {
			return c.failf(exitFail, "%v", err)
		}
	}
	return exitOK
}

// fetchRecords yields the store's records in key order, each key and
// value decoded by the key's family: every key, or those of the family
// only, or those whose name begins with prefix, at most limit of them (0:
// all). An error is yielded once, as the last pair.
func fetchRecords(s *store, only *codec.Layout, prefix string, limit int) iter.Seq2[record, error] {
	return func(yield func(record, error) bool) {
		n := 0
		for _, r := range dumpRanges(only, prefix, prefix != "") {
			stopped := false
			err := s.scan(r[0], r[1], func(k, v []byte) error {
				if limit > 0 && n == limit {
					return errStop
				}
				n++
				if !yield(decodeRecord(decodeKey(k), v, s.fm), nil) {
					stopped = true
					return errStop
				}
				return nil
			})
			if err != nil {
				yield(record{}, err)
				return
			}
			if stopped {
				return
			}
		}
	}
}
