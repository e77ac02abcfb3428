package link

import "sync"

// Meters are the functions that add packages' figures to DB.Metrics: a
// package registers one per queue, collection or feed it serves, and
// every call of DB.Metrics runs them all. M is the type they fill, always
// tipkv.Metrics (link cannot name it; MetersOf takes it as a type
// argument, so every fill function is typed). They are safe for
// concurrent use.
//
// A package registers its section like this:
//
//	ln, _ := link.Of(db)
//	link.MetersOf[tipkv.Metrics](&ln.Services).Set(metersKey{name}, func(m *tipkv.Metrics) {
//		m.Queues = append(m.Queues, tipkv.QueueMetrics{Name: name, Depth: c.depth.Load(), ...})
//	})
//
// A fill function runs on the goroutine that called Metrics, concurrently
// with the package's own work: read atomics, or take a lock briefly; never
// read the store (Metrics is polled every few seconds and must stay
// cheap). Counters count from the moment the package registered, in this
// process. DB.Metrics sorts each kind of section by name, so the order of
// registration does not matter.
type Meters[M any] struct {
	mu    sync.Mutex
	keys  []any
	fills map[any]func(m *M)
}

type metersKey[M any] struct{}

// MetersOf returns the meters of registry r that fill an M.
func MetersOf[M any](r *Registry) *Meters[M] {
	return r.Get(metersKey[M]{}, func() any { return new(Meters[M]) }).(*Meters[M])
}

// Set registers fill under key, replacing the function registered under
// the same key, if any: a package that opens a second handle on the same
// queue or collection registers once. key must be comparable.
func (ms *Meters[M]) Set(key any, fill func(m *M)) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.fills == nil {
		ms.fills = map[any]func(*M){}
	}
	if _, ok := ms.fills[key]; !ok {
		ms.keys = append(ms.keys, key)
	}
	ms.fills[key] = fill
}

// Delete removes the function registered under key (a queue dropped, say).
func (ms *Meters[M]) Delete(key any) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if _, ok := ms.fills[key]; !ok {
		return
	}
	delete(ms.fills, key)
	for i, k := range ms.keys {
		if k == key {
			ms.keys = append(ms.keys[:i], ms.keys[i+1:]...)
			break
		}
	}
}

// Fill runs every registered function with m, in the order they were
// first registered, without holding the lock (a fill function may Set).
func (ms *Meters[M]) Fill(m *M) {
	ms.mu.Lock()
	fills := make([]func(*M), 0, len(ms.keys))
	for _, k := range ms.keys {
		fills = append(fills, ms.fills[k])
	}
	ms.mu.Unlock()
	for _, f := range fills {
		f(m)
	}
}
