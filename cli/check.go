package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tipkv/tipkv"
	storecheck "github.com/tipkv/tipkv/internal/check"
)

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
  - no document version (whatever its codec) starts with the byte c1 but
    a delete marker, an escape (c1 00) or an expiry header (c1 01): any
    other was left by an upgrade from format 2 that did not escape it, so
    the store's values of format 2 that start with c1 00 or c1 01 may read
    differently than they were written;
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

func check(c *ctx, dir string, raw map[string]bool, max int) int {
	if max == 0 {
		max = -1 // list none, count all
	}
	var rep storecheck.Report
	s, err := c.openStoreErr(dir, false)
	switch {
	case errors.Is(err, tipkv.ErrCorrupt):
		// The store is there, and unreadable: that is check's verdict,
		// not a failure to run.
		rep = storecheck.Report{Count: 1, Problems: []storecheck.Problem{{Kind: "read", Where: "store", Detail: err.Error()}}}
		if max < 0 {
			rep.Problems = nil
		}
	case err != nil:
		return c.openFailed(dir, err)
	default:
		defer s.close()
		rep = storecheck.Store(s.kv, storecheck.Options{Values: true, Raw: raw, Max: max, FormatVersion: tipkv.FormatVersion})
	}
	return report(c, rep)
}

// report shows the checker's verdict and returns the exit status: 0 when
// healthy, 1 when not.
func report(c *ctx, rep storecheck.Report) int {
	if code := c.show(checkView{rep}); code != exitOK {
		return code
	}
	if !rep.Healthy() {
		return exitFail
	}
	return exitOK
}

// checkView is check's verdict: what was read, and the problems listed.
type checkView struct{ rep storecheck.Report }

func (v checkView) json() object {
	rep := v.rep
	list := []any{}
	for _, p := range rep.Problems {
		obj := object{{"kind", p.Kind}}
		if p.Key == nil {
			obj = append(obj, field{"family", p.Where})
		} else {
			obj = append(obj, decodeKey(p.Key).fields()...)
			obj = append(obj, field{"key_hex", fmt.Sprintf("%x", p.Key)})
		}
		list = append(list, append(obj, field{"detail", p.Detail}))
	}
	return object{
		{"healthy", rep.Healthy()}, {"keys", rep.Keys}, {"documents", rep.Documents}, {"events", rep.Events},
		{"messages", rep.Messages}, {"problem_count", rep.Count}, {"problems", list},
	}
}

func (v checkView) table(w io.Writer) error {
	rep := v.rep
	if len(rep.Problems) > 0 {
		t := newTable(w, "PROBLEM", "FAMILY", "KEY", "DETAIL")
		for _, p := range rep.Problems {
			if p.Key == nil {
				t.row(p.Kind, p.Where, "-", p.Detail)
				continue
			}
			k := decodeKey(p.Key)
			t.row(p.Kind, familyName(k.raw0()), k.text(), p.Detail)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if rep.Count > len(rep.Problems) {
		fmt.Fprintf(w, "... and %d more (--max)\n", rep.Count-len(rep.Problems))
	}
	verdict := "healthy"
	if !rep.Healthy() {
		verdict = fmt.Sprintf("%d problem(s)", rep.Count)
	}
	_, err := fmt.Fprintf(w, "checked %d keys (%d documents, %d events, %d queue messages): %s\n",
		rep.Keys, rep.Documents, rep.Events, rep.Messages, verdict)
	return err
}
