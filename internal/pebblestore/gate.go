package pebblestore

import (
	"sync"
	"sync/atomic"
)

// gate lets calls into the store without blocking while it is open, and
// decides when Pebble may close.
//
// Calls in flight (reads, commits, durability waits) are counted in
// inflight; Close waits for them. Iterators and snapshots are counted in
// held; Close does not wait for them, since their owner may be the very
// goroutine calling Close (Close inside a History loop) or may never come
// back (an iter.Pull without its stop): they end with ErrClosed at their
// next call, and the last one released closes Pebble. Entering never
// blocks, so a call made while another is in flight cannot deadlock
// against a pending Close.
type gate struct {
	inflight atomic.Int64
	held     atomic.Int64
	closed   atomic.Bool
	finished atomic.Bool
	mu       sync.Mutex    // serialises close
	wake     chan struct{} // inflight reached 0 after close, or writes stalled
	done     chan struct{} // closed when Pebble is closed (or left open)
}

func (g *gate) init() {
	g.wake = make(chan struct{}, 1)
	g.done = make(chan struct{})
}

func (g *gate) enter() bool {
	g.inflight.Add(1)
	if g.closed.Load() {
		g.exit()
		return false
	}
	return true
}

// exit ends a call. It reports whether the caller must try to finish: the
// gate is closed and this was the last call in flight.
func (g *gate) exit() bool {
	if g.inflight.Add(-1) == 0 && g.closed.Load() {
		g.signal()
		return true
	}
	return false
}

// detach turns the current call into a held iterator or snapshot.
func (g *gate) detach() {
	g.held.Add(1)
	g.exit() // held > 0 now, so nothing can finish yet; this wakes close
}

// release lets go of a held iterator or snapshot. It reports whether the
// caller must try to finish (the store is closed and nothing else is held).
func (g *gate) release() bool {
	return g.held.Add(-1) == 0 && g.closed.Load()
}

func (g *gate) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// close shuts the gate and waits until no call is in flight, or until
// stalled reports that the calls in flight are blocked on a failing disk.
// It reports false if the gate was already closed.
func (g *gate) close(stalled func() bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Swap(true) {
		return false
	}
	for g.inflight.Load() > 0 && !stalled() {
		<-g.wake
	}
	return true
}

// finish reports, exactly once, that the caller is the one to close Pebble:
// the gate is closed, nothing is held, and nothing is in flight or what is
// in flight is stalled on a failing disk (Pebble is then left open). The
// winner must call finished when done.
func (g *gate) finish(stalled func() bool) bool {
	if !g.closed.Load() || g.held.Load() > 0 {
		return false
	}
	if g.inflight.Load() > 0 && !stalled() {
		return false
	}
	return g.finished.CompareAndSwap(false, true)
}
