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

var feedCommand = &command{
	name:    "feed",
	args:    []string{"DIR", "STREAM"},
	summary: "show the events of one stream, newest first",
	help: `
Shows the newest events of STREAM, newest first: their position (Unix
nanoseconds), its time in UTC, the author and reason of the events
appended with metadata (--json gives the whole metadata), and the value
decoded from msgpack or JSON (hex when it is neither).

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
				if from, err = parseSince(*since, knobs.now()); err != nil {
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

// feedView is the newest events of a stream, as feed shows them.
type feedView struct {
	stream string
	newest int64 // the stream's newest position
	events []feedEvent
}

// feedEvent is one event: its position, its value and its metadata.
type feedEvent struct {
	position int64
	value    decoded
	meta     docVersion // meta and metaErr only: the rendering history shares
}

func feed(c *ctx, dir, stream string, n int, since int64) int {
	s, code := c.openStore(dir, false)
	if s == nil {
		return code
	}
	defer s.close()
	v, err := fetchFeed(s, stream, n, since)
	if err != nil {
		return c.failed(err)
	}
	return c.show(v)
}

// fetchFeed reads stream as package versioned reads it, with codec.Raw so
// that any value comes back: its newest position, then up to n events (0:
// all) at or after the position since, newest first. A stream with no
// event is a notFoundError.
func fetchFeed(s *store, stream string, n int, since int64) (*feedView, error) {
	f, err := versioned.NewFeed(s.db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		return nil, err
	}
	v := &feedView{stream: stream}
	found := false
	for e, err := range f.Newest(stream, tipkv.Query{Limit: 1}) {
		if err != nil {
			return nil, err
		}
		v.newest, found = e.Position, true
	}
	if !found {
		return nil, notFoundf("stream %q has no events", stream)
	}
	// Positions are at least 1: a since before that bounds nothing.
	for e, err := range f.Newest(stream, tipkv.Query{Limit: n, From: max(since, 0)}) {
		if err != nil {
			return nil, err
		}
		fe := feedEvent{position: e.Position, value: decode(e.Value)}
		if e.HasMetadata() {
			m, err := e.Metadata()
			fe.meta.meta, fe.meta.metaErr = &m, err
		}
		v.events = append(v.events, fe)
	}
	return v, nil
}

func (v *feedView) json() object {
	list := []any{}
	for _, e := range v.events {
		o := object{{"position", e.position}, {"time", positionTime(e.position)}}
		if e.meta.meta != nil {
			o = append(o, field{"meta", e.meta.metaObject()})
		}
		list = append(list, append(o, e.value.fields()...))
	}
	return object{{"stream", v.stream}, {"newest", v.newest}, {"events", list}}
}

// table shows AUTHOR and REASON when an event shown has metadata.
func (v *feedView) table(w io.Writer) error {
	withMeta := false
	for _, e := range v.events {
		withMeta = withMeta || e.meta.meta != nil
	}
	head := []string{"POSITION", "TIME"}
	if withMeta {
		head = append(head, "AUTHOR", "REASON")
	}
	t := newTable(w, append(head, "VALUE")...)
	for _, e := range v.events {
		row := []any{e.position, positionTime(e.position)}
		if withMeta {
			var m tipkv.Metadata
			if e.meta.meta != nil {
				m = *e.meta.meta
			}
			row = append(row, orDash(m.Author), orDash(m.Reason))
		}
		t.row(append(row, e.value.cell())...)
	}
	return t.flush()
}
