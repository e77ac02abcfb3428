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
	args:    []string{"STORE", "[STREAM]"},
	summary: "show consumer groups, how far each trails and what it has pending",
	help: `
Shows the consumer groups of STREAM (the named cursors Feed.Advance
moves), in order of their names, or without STREAM every group of the
store, by stream and name. For each: its position (that of the last event
it handled), its time in UTC, its lag (the time between its position and
the stream's newest event, 0 when it is caught up), PENDING, how many
events of the stream are after its position, and AGE, how long the oldest
of them has waited (-: none pending).

Pending events are counted by walking their keys, at most --max of them
per group (shown as N+ when more follow; 0: count them all).

A group that trails far holds Trim and retention back (unless the feed
trims past cursors): FeedRetention.StaleGroups warns of it and
DropStaleGroups drops it; DropGroup removes a group that is gone for good.

Exits 1 when there are no groups.`,
	setup: func(fs *flag.FlagSet) func(*ctx, []string) int {
		limit := fs.Int("max", 100_000, "count at most `N` pending events per group (0: all)")
		return func(c *ctx, args []string) int {
			if *limit < 0 {
				return c.usagef("--max must be >= 0, not %d", *limit)
			}
			stream := ""
			if len(args) > 1 {
				stream = args[1]
			}
			return groups(c, args[0], stream, *limit)
		}
	},
}

// groupsView is what groups shows.
type groupsView struct {
	stream string // "": every stream
	now    time.Time
	groups []versioned.Group // with their backlogs
}

func groups(c *ctx, target, stream string, limit int) int {
	s, code := c.openStore(target, false)
	if s == nil {
		return code
	}
	defer s.close()
	v, err := fetchGroups(s, stream, limit)
	if err != nil {
		return c.failed(err)
	}
	return c.show(v)
}

// fetchGroups reads the groups of stream ("": of every stream) as package
// versioned lists them, then the backlog of each, counted up to limit. No
// group is a notFoundError.
func fetchGroups(s *store, stream string, limit int) (*groupsView, error) {
	f, err := versioned.NewFeed(s.db, &versioned.FeedOptions[[]byte]{Codec: codec.Raw{}})
	if err != nil {
		return nil, err
	}
	v := &groupsView{stream: stream, now: knobs.now()}
	list := f.AllGroups()
	if stream != "" {
		list = f.Groups(stream)
	}
	var found []versioned.Group
	for g, err := range list {
		if err != nil {
			return nil, err
		}
		found = append(found, g)
	}
	for _, g := range found {
		b, err := f.Backlog(g.Stream, g.Name, limit)
		if errors.Is(err, tipkv.ErrNotFound) {
			continue // dropped since it was listed
		}
		if err != nil {
			return nil, err
		}
		v.groups = append(v.groups, b)
	}
	if len(v.groups) == 0 {
		if stream == "" {
			return nil, notFoundf("the store has no consumer groups")
		}
		return nil, notFoundf("stream %q has no consumer groups", stream)
	}
	return v, nil
}

// pending is a group's pending count as shown: N, or N+ when more follow.
func pending(g versioned.Group) string {
	if g.More {
		return fmt.Sprint(g.Pending, "+")
	}
	return fmt.Sprint(g.Pending)
}

// age is how long g's oldest pending event has waited, "-" for none.
func (v *groupsView) age(g versioned.Group) string {
	if g.Oldest == 0 {
		return "-"
	}
	return g.PendingAge(v.now).Round(time.Millisecond).String()
}

func (v *groupsView) json() object {
	list := []any{}
	for _, g := range v.groups {
		o := object{{"stream", g.Stream}, {"group", g.Name}, {"position", g.Position}, {"time", positionTime(g.Position)},
			{"lag_ns", int64(g.Lag())}, {"newest", g.Newest}, {"pending", g.Pending}, {"pending_more", g.More}}
		if g.Oldest != 0 {
			o = append(o, field{"oldest_pending", g.Oldest}, field{"pending_age_ns", int64(g.PendingAge(v.now))})
		}
		list = append(list, o)
	}
	if v.stream == "" {
		return object{{"groups", list}}
	}
	newest := int64(0)
	if len(v.groups) > 0 {
		newest = v.groups[0].Newest
	}
	return object{{"stream", v.stream}, {"newest", newest}, {"groups", list}}
}

func (v *groupsView) table(w io.Writer) error {
	if v.stream != "" {
		t := newTable(w, "GROUP", "POSITION", "TIME", "LAG", "PENDING", "AGE")
		for _, g := range v.groups {
			t.row(g.Name, g.Position, positionTime(g.Position), g.Lag().String(), pending(g), v.age(g))
		}
		return t.flush()
	}
	t := newTable(w, "STREAM", "GROUP", "POSITION", "TIME", "LAG", "PENDING", "AGE")
	for _, g := range v.groups {
		t.row(g.Stream, g.Name, g.Position, positionTime(g.Position), g.Lag().String(), pending(g), v.age(g))
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
