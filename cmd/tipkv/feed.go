package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/tipkv/tipkv/codec"
)

var feedCommand = &command{
	name:    "feed",
	args:    []string{"DIR", "STREAM"},
	summary: "show the events of one stream, newest first",
	help: `
Shows the newest events of STREAM, newest first: their position (Unix
nanoseconds), its time in UTC, and the value decoded from msgpack or JSON
(hex when it is neither).

--since T keeps the events at or after T, where T is an RFC 3339 time
(2025-01-02T15:04:05Z), a duration back from now (90m, 24h), or a position
in Unix nanoseconds.

Exits 1 when the stream has no events.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		n := fs.Int("n", 10, "show at most `N` events; 0 shows all")
		since := fs.String("since", "", "show only events at or after `T` (time, duration or position)")
		return func(c *ctx, args []string) int {
			if *n < 0 {
				return c.usagef("-n must be >= 0, not %d", *n)
			}
			from := int64(0)
			if *since != "" {
				var err error
				if from, err = parseSince(*since, time.Now()); err != nil {
					return c.usagef("--since: %v", err)
				}
			}
			return feed(c, args[0], args[1], *n, from)
		}
	},
}

// parseSince turns --since into a position: an RFC 3339 time, a duration
// back from now, or a number of Unix nanoseconds.
func parseSince(s string, now time.Time) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixNano(), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d).UnixNano(), nil
	}
	return 0, fmt.Errorf("%q is neither an RFC 3339 time, a duration nor a position in Unix nanoseconds", s)
}

func feed(c *ctx, dir, stream string, n int, since int64) int {
	s, code := c.openStore(dir, false)
	if s == nil {
		return code
	}
	defer s.close()

	entries, newest, found, err := s.readNewest(segPrefix(codec.FamilyFeed, stream), nil, n, since, false)
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	if !found {
		return c.notFoundf("stream %q has no events", stream)
	}

	if c.json {
		list := []any{}
		for _, e := range entries {
			list = append(list, append(object{{"position", e.n}, {"time", positionTime(e.n)}}, e.value.fields()...))
		}
		err = writeJSON(c.stdout, object{{"stream", stream}, {"newest", newest}, {"events", list}})
	} else {
		t := newTable(c.stdout, "POSITION", "TIME", "VALUE")
		for _, e := range entries {
			t.row(e.n, positionTime(e.n), e.value.cell())
		}
		err = t.flush()
	}
	if err != nil {
		return c.failf(exitFail, "%v", err)
	}
	return exitOK
}
