package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/versioned"
)

func (c *Console) viewStream(r *http.Request, p params) (any, error) {
	if err := needName(p); err != nil {
		return nil, err
	}
	limit := limitOr(p, defaultEvents)
	rend := c.renderer(KindStream, p.Name)
	out := Events{Stream: p.Name, Events: []Event{}, Groups: []Group{}}
	var err error
	if out.Newest, err = c.newest(p.Name); err != nil {
		return nil, err
	}
	var last versioned.Event[[]byte]
	for e, err := range c.feed.Newest(p.Name, tipkv.Query{After: tipkv.Cursor(p.After), Limit: limit + 1}) {
		if err != nil {
			return nil, err
		}
		if len(out.Events) == limit {
			out.Next = string(last.Cursor())
			break
		}
		out.Events = append(out.Events, c.event(rend, e))
		last = e
	}
	var groups []versioned.Group
	for g, err := range c.feed.Groups(p.Name) {
		if err != nil {
			return nil, err
		}
		groups = append(groups, g)
	}
	for _, g := range groups {
		b, err := c.feed.Backlog(p.Name, g.Name, PendingMax)
		if errors.Is(err, tipkv.ErrNotFound) {
			continue // dropped since it was listed
		}
		if err != nil {
			return nil, err
		}
		out.Groups = append(out.Groups, Group{Name: g.Name, NameHex: hexIfInvalid(g.Name), Position: b.Position,
			Lag: time.Duration(max(out.Newest-b.Position, 0)), Pending: b.Pending, PendingMore: b.More, OldestPending: b.Oldest})
	}
	if out.Newest == 0 && len(out.Groups) == 0 {
		return nil, fmt.Errorf("%w: no stream %q (it holds no event and no group)", tipkv.ErrNotFound, p.Name)
	}
	return out, nil
}

// newest is the position of the stream's newest event, 0 if it has none.
func (c *Console) newest(stream string) (int64, error) {
	for e, err := range c.feed.Newest(stream, tipkv.Query{Limit: 1}) {
		if err != nil {
			return 0, err
		}
		return e.Position, nil
	}
	return 0, nil
}

func (c *Console) event(rend Renderer, e versioned.Event[[]byte]) Event {
	return Event{Position: e.Position, Time: e.Time().UTC(), Value: c.value(rend, e.Value)}
}

// heartbeat is how often a quiet live tail sends a comment, so that
// proxies and browsers keep the connection: a timer, not a read.
const heartbeat = 15 * time.Second

// tail is GET /api/tail?name=STREAM[&after=POSITION]: a live tail of a
// stream as server-sent events (text/event-stream). Each event of the
// stream after the position (the Last-Event-ID header resumes, and
// without either it starts at the newest event, so only new ones come)
// is sent as an SSE event named "event", its id the position and its
// data an Event in JSON. It reads with Feed.Follow: it sleeps until a
// commit appends to the stream (on Pebble, woken by the commit; nothing
// polls), and ends when the client goes, the console closes or the DB
// closes.
func (c *Console) tail(w http.ResponseWriter, r *http.Request) {
	p, err := parseParams(r.URL.RawQuery, pName, pAfter)
	if err == nil {
		err = needName(p)
	}
	if err == nil {
		err = c.checkOpen()
	}
	var after int64
	if err == nil {
		from := p.After
		if id := r.Header.Get("Last-Event-ID"); id != "" {
			from = id
		}
		if from != "" {
			if after, err = number(from, 0, 1<<63-1); err != nil {
				err = fmt.Errorf("%w: tail after %v", tipkv.ErrInvalid, err)
			}
		} else {
			after, err = c.newest(p.Name)
		}
	}
	flusher, ok := w.(http.Flusher)
	if err == nil && !ok {
		err = fmt.Errorf("console: the response writer cannot flush: no live tail here")
	}
	if err != nil {
		c.jsonError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 1000\n: tail of %q after %d\n\n", p.Name, after)
	flusher.Flush()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	type item struct {
		e   versioned.Event[[]byte]
		err error
	}
	events := make(chan item)
	go func() {
		defer close(events)
		for e, err := range c.feed.Follow(ctx, p.Name, after) {
			select {
			case events <- item{e, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	rend := c.renderer(KindStream, p.Name)
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		select {
		case it, ok := <-events:
			if !ok {
				return
			}
			if it.err != nil {
				if ctx.Err() == nil {
					b, _ := json.Marshal(apiError{Error: it.err.Error(), Status: statusOf(it.err)})
					fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
					flusher.Flush()
				}
				return
			}
			b, err := json.Marshal(c.event(rend, it.e))
			if err != nil {
				return
			}
			fmt.Fprintf(w, "event: event\nid: %d\ndata: %s\n\n", it.e.Position, b)
			flusher.Flush()
		case <-beat.C:
			fmt.Fprint(w, ": ping\n\n")
			flusher.Flush()
		case <-ctx.Done():
			return
		}
	}
}
