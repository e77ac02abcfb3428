package queue

import (
	"fmt"
	"slices"
	"time"

	"github.com/tipkv/tipkv"
)

// Message groups on Pebble (see "Message groups" in the package doc).
//
// A message of a group may be delivered only while fewer than the window's
// count of its group's messages come before it in the queue: the window
// is the group's oldest live messages (ready, leased, delayed or retried),
// so a group's messages go out in order, at most window at a time, and a
// message that keeps failing holds its group until it is acknowledged or
// moves to the dead letters. Every live message in [head, cursor) has an
// entry, so a group's entries, in seq order, are all its messages there:
// an entry's place among them is how many of the group's messages come
// before it. Entries past the window wait in stBlocked, in no heap, until
// removing an older one brings them into it. A place only ever drops (new
// messages join at the end), so an entry in the window stays in it.

// DefaultGroupWindow is Options.GroupWindow when it is zero: a group's
// messages are delivered one at a time, in order.
const DefaultGroupWindow = 1

// setWindow sets the queue's group window for its first handle in the
// DB, and refuses another window later.
func (c *core) setWindow(window int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.window {
	case 0:
		c.window = window
	case window:
	default:
		return fmt.Errorf("%w: queue %q: group window %d: the queue is open with window %d", tipkv.ErrInvalid, c.name, window, c.window)
	}
	return nil
}

// group is one message group's live entries in [head, cursor), by seq.
type group struct {
	key  string
	live []*entry
}

// admit gives the fresh entry e, just read from the cursor with header h,
// its group, and says whether it is deliverable at nowNS. One behind its
// group's window is set aside blocked, one delayed past nowNS waiting;
// either way it returns false. The caller holds mu.
func (c *core) admit(e *entry, h header, nowNS int64) bool {
	if len(h.group) > 0 {
		g := c.groups[string(h.group)]
		if g == nil {
			g = &group{key: string(h.group)}
			c.groups[g.key] = g
		}
		e.grp = g
		g.live = append(g.live, e)
		if len(g.live) > c.window {
			c.setState(e, stBlocked, fromUnixNano(h.at))
			return false
		}
	}
	if h.at > nowNS {
		c.setState(e, stWaiting, time.Unix(0, h.at))
		return false
	}
	return true
}

// leaveGroup takes the removed entry e out of its group, and brings the
// group's next blocked message into the window: visible at once, or
// waiting for its visible-at time. The caller holds mu.
func (c *core) leaveGroup(e *entry) {
	g := e.grp
	if g == nil {
		return
	}
	e.grp = nil
	i := slices.Index(g.live, e) // almost always 0: the oldest goes first
	if i < 0 {
		return
	}
	g.live = slices.Delete(g.live, i, i+1)
	if len(g.live) == 0 {
		delete(c.groups, g.key)
		return
	}
	if i >= c.window || len(g.live) < c.window {
		return // the window lost none of its messages, or holds them all
	}
	n := g.live[c.window-1]
	if n.state != stBlocked {
		return
	}
	if at := n.deadline; !at.IsZero() && at.After(c.clock()) {
		c.setState(n, stWaiting, at)
		return
	}
	c.setState(n, stReady, time.Time{})
	c.notify()
}

// windows counts the messages of each group that a read of a queue from
// its head has seen, to tell which are in their group's window (shared
// engines, where such a read sees every live message of a group before
// the one at hand).
type windows struct {
	size int
	seen map[string]int
}

// behind counts the message with header h and reports whether it is
// behind its group's window.
func (w *windows) behind(h header) bool {
	if len(h.group) == 0 {
		return false
	}
	if w.seen == nil {
		w.seen = make(map[string]int)
	}
	n := w.seen[string(h.group)]
	w.seen[string(h.group)] = n + 1
	return n >= w.size
}

// blockedIn reports whether the message with header h, read from the
// cursor by a read that saw extra[g] messages of each group g past it
// already, is behind its group's window; it counts the message in extra.
// It is for reads that make no entries (Peek). The caller holds mu.
func (c *core) blockedIn(h header, extra map[string]int) bool {
	if len(h.group) == 0 {
		return false
	}
	n := extra[string(h.group)]
	if g := c.groups[string(h.group)]; g != nil {
		n += len(g.live)
	}
	extra[string(h.group)]++
	return n >= c.window
}
