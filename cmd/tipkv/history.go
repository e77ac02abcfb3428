package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/internal/docfmt"
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
(RFC 3339) it starts at the version that was latest at TIME.

A deleted document shows its history, the newest version being the delete
marker, shown as (deleted) ("deleted": true with --json). Exits 1 when the
document has no versions (it never existed, or was purged); an --as-of older
than every kept version shows nothing and exits 0.`,
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

// numbered is one entry of a newest-first family (a version or an event):
// its number and its decoded value.
type numbered struct {
	n     int64
	value decoded
}

func history(c *ctx, dir, coll, id string, n int, asOf *optionalInt, at time.Time) int {
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
	limit := n
	if !at.IsZero() {
		limit = 0 // the versions after at are skipped below
	}
	entries, latest, found, err := s.readNewest(prefix, from, limit, math.MinInt64, true)
	if !at.IsZero() {
		for len(entries) > 0 && time.Unix(0, s.fm.Parse(entries[0].value.raw).Time).After(at) {
			if s.fm.Parse(entries[0].value.raw).Time == 0 {
				return c.failf(exitFail, "version %d was written before commit times: its time is unknown", entries[0].n)
			}
			entries = entries[1:]
		}
		if n > 0 && len(entries) > n {
			entries = entries[:n]
		}
	}
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	if !found {
		return c.notFoundf("collection %q has no document %q", coll, id)
	}

	timed, withMeta := false, false
	for _, e := range entries {
		ver := s.fm.Parse(e.value.raw)
		timed = timed || ver.Time != 0
		withMeta = withMeta || ver.Meta != nil
	}
	if c.json {
		list := []any{}
		for _, e := range entries {
			o := object{{"version", e.n}}
			ver := s.fm.Parse(e.value.raw)
			if ver.Time != 0 {
				o = append(o, field{"time", time.Unix(0, ver.Time).UTC().Format(time.RFC3339Nano)})
			}
			if ver.Meta != nil {
				o = append(o, field{"meta", metaObject(ver.Meta)})
			}
			if s.fm.IsDeleteMarker(e.value.raw) {
				list = append(list, append(o, field{"deleted", true}))
				continue
			}
			list = append(list, append(o, e.value.fields()...))
		}
		err = writeJSON(c.stdout, object{
			{"collection", coll}, {"id", id}, {"latest", latest}, {"versions", list},
		})
	} else {
		head := []string{"VERSION"}
		if timed {
			head = append(head, "TIME")
		}
		if withMeta {
			head = append(head, "AUTHOR", "REASON")
		}
		t := newTable(c.stdout, append(head, "VALUE")...)
		for _, e := range entries {
			row := []any{e.n}
			ver := s.fm.Parse(e.value.raw)
			if timed {
				row = append(row, timeCell(ver.Time))
			}
			if withMeta {
				m, _ := docfmt.ParseMeta(ver.Meta)
				row = append(row, orDash(m.Author), orDash(m.Reason))
			}
			if s.fm.IsDeleteMarker(e.value.raw) {
				t.row(append(row, "(deleted)")...)
				continue
			}
			t.row(append(row, e.value.cell())...)
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

// timeCell renders a commit time for a table: "-" for none.
func timeCell(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// metaObject renders encoded metadata for JSON; its error when it does
// not decode.
func metaObject(b []byte) any {
	m, err := docfmt.ParseMeta(b)
	if err != nil {
		return object{{"error", err.Error()}, {"hex", fmt.Sprintf("%x", b)}}
	}
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
