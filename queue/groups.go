package queue

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/knobs"
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

// maxSpareGroups bounds the emptied groups a queue keeps for new ones:
// with many groups of a message or two each, most reads start a group and
// most consumes end one.
const maxSpareGroups = 256

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
			if n := len(c.spareGroups); n > 0 {
				g, c.spareGroups = c.spareGroups[n-1], c.spareGroups[:n-1]
			} else {
				g = new(group)
			}
			g.key = string(h.group)
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
	if i == 0 {
		g.live[0] = nil
		g.live = g.live[1:] // no copy of a long backlog per consume
	} else {
		g.live = slices.Delete(g.live, i, i+1)
	}
	if len(g.live) == 0 {
		delete(c.groups, g.key)
		if len(c.spareGroups) < maxSpareGroups {
			g.key, g.live = "", g.live[:0]
			c.spareGroups = append(c.spareGroups, g)
		}
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
// the one at hand). It also passes over runs of messages an earlier read
// found behind their windows (see blockedRun), and records new ones.
type windows struct {
	size int
	seen map[string]int

	runs   []blockedRun // known runs, from sharedMem; a run found stale is dropped
	jumpTo int64        // where the read goes on, past a known run; 0: the next item
	cur    blockedRun   // the run the read is in, if cur.lo > 0
	curN   int          // its items
	found  []blockedRun // runs this read recorded
}

// blockedRun is a run of a shared queue's items [lo, hi] that a read found
// all behind their groups' windows, with no other live item among them.
// Items below lo come before every item of the run in its group, and no
// item is ever added below the tail: so while a read from the head has
// seen full windows of every group of the run by the time it reaches the
// run, every item still in it is behind its window, and the read can pass
// over the run without reading it. The hint goes stale only by windows
// that open, which the read sees before it gets there.
type blockedRun struct {
	lo, hi int64
	groups []string
}

// Bounds of the runs remembered: a run is recorded from
// knobs.Queue.BlockedRunMin items, with up to maxRunGroups groups, and a
// queue keeps maxRuns of them.
const (
	maxRunGroups = 8
	maxRuns      = 16
)

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

// item is behind for the item at seq with header h (ok false when the
// header did not parse, which is behind no window): it also ends or
// extends the run the read is in, and sets jumpTo when the item starts a
// known run whose groups all have full windows.
func (w *windows) item(seq int64, h header, ok bool) bool {
	w.jumpTo = 0
	if !ok || !w.behind(h) {
		w.endRun()
		return false
	}
	if w.cur.lo == 0 || (len(w.cur.groups) == maxRunGroups && !slices.Contains(w.cur.groups, string(h.group))) {
		w.endRun()
		w.cur = blockedRun{lo: seq}
	}
	w.cur.hi = seq
	w.curN++
	if !slices.Contains(w.cur.groups, string(h.group)) {
		w.cur.groups = append(w.cur.groups, string(h.group))
	}
	for i := 0; i < len(w.runs); i++ {
		r := w.runs[i]
		if seq < r.lo || seq > r.hi {
			continue
		}
		if !w.full(r.groups) {
			w.runs = slices.Delete(w.runs, i, i+1)
			i--
			continue
		}
		if r.hi > seq {
			w.jumpTo = r.hi + 1
			w.endRun() // the known run stays known
		}
		break
	}
	return true
}

// full reports whether the read has seen full windows of every group in gs.
func (w *windows) full(gs []string) bool {
	for _, g := range gs {
		if w.seen[g] < w.size {
			return false
		}
	}
	return true
}

// endRun records the run the read was in, if long enough.
func (w *windows) endRun() {
	if w.cur.lo > 0 && w.curN >= knobs.Queue.BlockedRunMin {
		w.found = append(w.found, w.cur)
	}
	w.cur, w.curN = blockedRun{}, 0
}

// jump is scanJumping's jump.
func (w *windows) jump() int64 { return w.jumpTo }

// loadRuns takes the runs a queue remembers.
func (c *core) loadRuns(w *windows) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.runs = slices.Clone(c.sm.blocked)
}

// storeRuns keeps what a read that ended learned about runs: the known
// runs it did not find stale, and the ones it recorded (a recorded one
// replaces the known ones it overlaps), the lowest maxRuns of them.
func (c *core) storeRuns(w *windows) {
	w.endRun()
	runs := w.runs
	for _, f := range w.found {
		runs = slices.DeleteFunc(runs, func(r blockedRun) bool { return r.lo <= f.hi && f.lo <= r.hi })
		runs = append(runs, f)
	}
	slices.SortFunc(runs, func(a, b blockedRun) int { return cmp.Compare(a.lo, b.lo) })
	if len(runs) > maxRuns {
		runs = runs[:maxRuns]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sm.blocked = runs
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
