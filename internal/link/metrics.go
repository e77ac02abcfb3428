package link

import "sync"

// Meters are the functions that add packages' figures to DB.Metrics: a
// package registers one per queue, collection or feed it serves, and
// every call of DB.Metrics runs them all. They are safe for concurrent
// use.
//
// A fill function gets the *tipkv.Metrics being built (as any: link cannot
// name the root package) and appends its section, for example
//
//	reg, _ := link.Services(db)
//	reg.Meters().Set(metersKey{name}, func(m any) {
//		mm := m.(*tipkv.Metrics)
//		mm.Queues = append(mm.Queues, tipkv.QueueMetrics{Name: name, Depth: c.depth.Load(), ...})
//	})
//
// It runs on the goroutine that called Metrics, concurrently with the
// package's own work: read atomics, or take a lock briefly; never read the
// store (Metrics is polled every few seconds and must stay cheap). Counters
// count from the moment the package registered, in this process. DB.Metrics
// sorts each kind of section by name, so the order of registration does not
// matter.
type Meters struct {
	mu    sync.Mutex
	keys  []any
	fills map[any]func(m any)
}

type metersKey struct{}

// Meters returns the DB's meters.
func (r *Registry) Meters() *Meters {
	return r.Get(metersKey{}, func() any { return new(Meters) }).(*Meters)
}

// Set registers fill under key, replacing the function registered under
// the same key, if any: a package that opens a second handle on the same
// queue or collection registers once. key must be comparable.
func (ms *Meters) Set(key any, fill func(m any)) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.fills == nil {
		ms.fills = map[any]func(any){}
	}
	if _, ok := ms.fills[key]; !ok {
		ms.keys = append(ms.keys, key)
	}
	ms.fills[key] = fill
}

// Delete removes the function registered under key (a queue dropped, say).
func (ms *Meters) Delete(key any) {
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
func (ms *Meters) Fill(m any) {
	ms.mu.Lock()
	fills := make([]func(any), 0, len(ms.keys))
	for _, k := range ms.keys {
		fills = append(fills, ms.fills[k])
	}
	ms.mu.Unlock()
	for _, f := range fills {
		f(m)
	}
}
