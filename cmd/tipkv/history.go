package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"

	"github.com/tipkv/tipkv/codec"
)

var historyCommand = &command{
	name:    "history",
	args:    []string{"DIR", "COLLECTION", "ID"},
	summary: "show the versions of one document, newest first",
	help: `
Shows the versions of document ID in COLLECTION, newest first, with their
values decoded from msgpack or JSON (hex when a value is neither). With --as-of V
it starts at the version that was latest when version V was written: the
greatest version <= V.

A deleted document shows its history, the newest version being the delete
marker, shown as (deleted) ("deleted": true with --json). Exits 1 when the
document has no versions (it never existed, or was purged); an --as-of older
than every kept version shows nothing and exits 0.`,
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

// numbered is one entry of a newest-first family (a version or an event):
// its number and its decoded value.
type numbered struct {
	n     int64
	value decoded
}

func history(c *ctx, dir, coll, id string, n int, asOf *optionalInt) int {
	s, code := c.openStore(dir, false)
	if s == nil {
		return code
	}
	defer s.close()

	prefix := segPrefix(codec.FamilyVersions, coll, id)
	var from []byte
	if asOf.set {
		from = codec.AppendDesc(append([]byte(nil), prefix...), asOf.v)
	}
	entries, latest, found, err := s.readNewest(prefix, from, n, math.MinInt64, true)
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	if !found {
		return c.notFoundf("collection %q has no document %q", coll, id)
	}

	if c.json {
		list := []any{}
		for _, e := range entries {
			if s.fm.IsDeleteMarker(e.value.raw) {
				list = append(list, object{{"version", e.n}, {"deleted", true}})
				continue
			}
			list = append(list, append(object{{"version", e.n}}, e.value.fields()...))
		}
		err = writeJSON(c.stdout, object{
			{"collection", coll}, {"id", id}, {"latest", latest}, {"versions", list},
		})
	} else {
		t := newTable(c.stdout, "VERSION", "VALUE")
		for _, e := range entries {
			if s.fm.IsDeleteMarker(e.value.raw) {
				t.row(e.n, "(deleted)")
				continue
			}
			t.row(e.n, e.value.cell())
		}
		err = t.flush()
	}
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	return exitOK
}

// readNewest reads the keys under prefix of a newest-first family: up to
// limit entries (0: all), starting at from (nil: the newest) and stopping
// before the first number below min. docs says the values are document
// versions (else feed events). It also returns the newest number
// under prefix; found is false when there is none.
func (s *store) readNewest(prefix, from []byte, limit int, min int64, docs bool) (entries []numbered, newest int64, found bool, err error) {
	end := codec.PrefixEnd(prefix)
	number := func(k []byte) (int64, error) {
		n, _, err := codec.DecodeDesc(k[len(prefix):])
		if err != nil {
			return 0, fmt.Errorf("key %x: %w", k, err)
		}
		return n, nil
	}
	err = s.scan(prefix, end, func(k, _ []byte) error {
		newest, err = number(k)
		found = err == nil
		if err != nil {
			return err
		}
		return errStop
	})
	if err != nil || !found {
		return nil, 0, found, err
	}
	if from == nil {
		from = prefix
	}
	err = s.scan(from, end, func(k, v []byte) error {
		if limit > 0 && len(entries) == limit {
			return errStop
		}
		n, err := number(k)
		if err != nil {
			return err
		}
		if n < min {
			return errStop
		}
		d := decode(v)
		if docs {
			d = decodeDoc(v, s.fm)
		}
		entries = append(entries, numbered{n, d})
		return nil
	})
	return entries, newest, found, err
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
