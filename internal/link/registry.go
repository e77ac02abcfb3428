package link

import "sync"

// Registry holds per-DB in-memory state for tipkv's packages, keyed by
// anything comparable. It is safe for concurrent use.
type Registry struct {
	mu sync.Mutex
	m  map[any]any
	// closers run when the DB closes, in reverse order.
	closers []func()
}

// Get returns the value under key, creating it with init on first use.
func (r *Registry) Get(key any, init func() any) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.m[key]; ok {
		return v
	}
	if r.m == nil {
		r.m = make(map[any]any)
	}
	v := init()
	r.m[key] = v
	return v
}

// OnClose registers f to run when the DB closes, before the store closes:
// to wake goroutines blocked in Wait, for example.
func (r *Registry) OnClose(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closers = append(r.closers, f)
}

// Close runs the OnClose functions.
func (r *Registry) Close() {
	r.mu.Lock()
	closers := r.closers
	r.closers = nil
	r.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}
