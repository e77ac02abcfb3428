package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/codec"
	"github.com/tipkv/tipkv/versioned"
)

var groupsCommand = &command{
	name:    "groups",
	args:    []string{"STORE", "STREAM"},
	summary: "show the consumer groups of a stream and how far each trails",
	help: `
Shows the consumer groups of STREAM (the named cursors Feed.Advance
moves), in order of their names: each group's position (that of the last
event it handled), its time in UTC, and its lag, the time between its
position and the stream's newest event (0 when it is caught up).

A group that trails far holds Trim and retention back (unless the feed
trims past cursors); DropGroup removes a group that is gone for good.

Exits 1 when the stream has no groups.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		return func(c *ctx, args []string) int { return groups(c, args[0], args[1]) }
	},
}

// groupsView is what groups shows.
type groupsView struct {
	stream string
	newest int64 // the stream's newest position, 0 when it has no event
	groups []versioned.Group
}

func groups(c *ctx, target, stream string) int {
	s, code := c.openStore(target, false)
	if s == nil {
		return code
	}
	defer s.close()
	v, err := fetchGroups(s, stream)
	if err != nil {
		return c.failed(err)
	}
	return c.show(v)
}

// fetchGroups reads stream's groups as package versioned lists them, and
// its newest position. A stream with no group is a notFoundError.
func fetchGroups(s *store, stream string) (*groupsView, error) {
	f, err := versioned.NewFeed(s.db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		return nil, err
	}
	v := &groupsView{stream: stream}
	for g, err := range f.Groups(stream) {
		if err != nil {
			return nil, err
		}
		v.groups = append(v.groups, g)
	}
	if len(v.groups) == 0 {
		return nil, notFoundf("stream %q has no consumer groups", stream)
	}
	for e, err := range f.Newest(stream, tipkv.Query{Limit: 1}) {
		if err != nil {
			return nil, err
		}
		v.newest = e.Position
	}
	return v, nil
}

// lag is how far a group at position p trails the newest event.
func (v *groupsView) lag(p int64) time.Duration { return time.Duration(max(v.newest-p, 0)) }

func (v *groupsView) json() object {
	list := []any{}
	for _, g := range v.groups {
		list = append(list, object{{"group", g.Name}, {"position", g.Position}, {"time", positionTime(g.Position)}, {"lag_ns", int64(v.lag(g.Position))}})
	}
	return object{{"stream", v.stream}, {"newest", v.newest}, {"groups", list}}
}

func (v *groupsView) table(w io.Writer) error {
	t := newTable(w, "GROUP", "POSITION", "TIME", "LAG")
	for _, g := range v.groups {
		t.row(g.Name, g.Position, positionTime(g.Position), v.lag(g.Position).String())
	}
	return t.flush()
}

var tailCommand = &command{
	name:    "tail",
	args:    []string{"STORE", "STREAM"},
	summary: "show the events of a stream as they commit, until interrupted",
	help: `
Shows the events of STREAM oldest first as they commit, one line each
(position, time in UTC, value), from the newest N events on (-n, 10 by
default; 0: only new ones), or from --since T (a time, a duration back
from now, or a position), until interrupted (Ctrl-C, SIGTERM). With
--json each event is one JSON object on a line.

It follows the stream as Feed.Follow does: woken by the engine's own
notifications where it has them, never polling the store in a loop on
Pebble. A Pebble directory is locked while it is tailed, so this is for
the stores of shared engines (PostgreSQL, etcd), whose services write
while it runs, or a stopped store.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		n := fs.Int("n", 10, "begin with the newest `N` events (0: only new ones)")
		since := fs.String("since", "", "begin at `T` (time, duration or position) instead")
		return func(c *ctx, args []string) int {
			if *n < 0 {
				return c.usagef("-n must be >= 0, not %d", *n)
			}
			from := int64(-1)
			if *since != "" {
				var err error
				if from, err = parseSince(*since, knobs.now()); err != nil {
					return c.usagef("--since: %v", err)
				}
			}
			return tail(c, args[0], args[1], *n, from)
		}
	},
}

func tail(c *ctx, target, stream string, n int, since int64) int {
	s, code := c.openStore(target, false)
	if s == nil {
		return code
	}
	defer s.close()
	f, err := versioned.NewFeed(s.db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		return c.failed(err)
	}
	// after is the position Follow starts after: that of the event before
	// the newest n, or since's.
	after := int64(0)
	switch {
	case since >= 0:
		after = max(since-1, 0)
	default:
		i := 0
		for e, err := range f.Newest(stream, tipkv.Query{Limit: n + 1}) {
			if err != nil {
				return c.failed(err)
			}
			if i++; i == n+1 {
				after = e.Position
				break
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if knobs.tailing != nil {
		knobs.tailing(cancel)
	}
	for e, err := range f.Follow(ctx, stream, after) {
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return exitOK
			}
			return c.failed(err)
		}
		d := decode(e.Value)
		if c.json {
			err = writeJSON(c.stdout, append(object{{"position", e.Position}, {"time", positionTime(e.Position)}}, d.fields()...))
		} else {
			_, err = fmt.Fprintf(c.stdout, "%d  %s  %s\n", e.Position, positionTime(e.Position), d.cell())
		}
		if err != nil {
			return c.failf(exitFail, "%v", err)
		}
		if knobs.tailed != nil {
			knobs.tailed(e.Position)
		}
	}
	return exitOK
}
