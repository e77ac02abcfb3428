package memengine

import (
	"bytes"
	"context"

	"github.com/tipkv/tipkv/engine"
)

// watcher is one Watch: its range and its channel, registered on the
// Memory until its context ends or its Store closes.
type watcher struct {
	lo, hi []byte
	ch     chan struct{} // buffered 1: a wake-up pending is enough
}

// Watch returns a channel that receives a value after each commit, from
// any Store on the Memory, that writes a key in [lo, hi) or deletes a
// range overlapping it. Wake-ups coalesce: one value may stand for
// several commits. The channel is closed when ctx ends or s closes.
func (s *Store) Watch(ctx context.Context, lo, hi []byte) (<-chan struct{}, error) {
	if len(lo) == 0 || hi == nil || bytes.Compare(lo, hi) >= 0 {
		return nil, engine.ErrInvalid
	}
	w := &watcher{lo: bytes.Clone(lo), hi: bytes.Clone(hi), ch: make(chan struct{}, 1)}
	m := s.m
	m.mu.Lock()
	if s.closed.Load() {
		m.mu.Unlock()
		return nil, engine.ErrClosed
	}
	m.watchers[w] = struct{}{} // from here on, no commit is missed
	m.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-s.done:
		}
		m.mu.Lock()
		delete(m.watchers, w)
		close(w.ch) // under m.mu: notify sends under it too
		m.mu.Unlock()
	}()
	return w.ch, nil
}

// notify wakes the watchers whose range ops touch. It is called under
// m.mu, with the commit published.
func (m *Memory) notify(ops []op) {
	for x := range m.watchers {
		if touches(ops, x.lo, x.hi) {
			select {
			case x.ch <- struct{}{}:
			default:
			}
		}
	}
}

// touches reports whether a write of ops falls in [lo, hi).
func touches(ops []op, lo, hi []byte) bool {
	for _, o := range ops {
		if o.kind == opDeleteRange {
			if bytes.Compare(o.key, hi) < 0 && bytes.Compare(lo, o.end) < 0 {
				return true
			}
		} else if bytes.Compare(lo, o.key) <= 0 && bytes.Compare(o.key, hi) < 0 {
			return true
		}
	}
	return false
}
