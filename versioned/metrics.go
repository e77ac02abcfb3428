package versioned

import (
	"sync/atomic"

	"github.com/tipkv/tipkv"
)

// collMeters are one collection's counters in this process, shared by
// every handle on it and read by DB.Metrics (tipkv.CollectionMetrics). A
// Tx adds what it wrote and removed when it is applied, so an Update that
// fails counts nothing.
type collMeters struct {
	name    string
	writes  atomic.Uint64
	removed atomic.Uint64
}

type collMetersKey struct{ name string }

// collectionMeters returns the meters of the collection name, registering
// them with DB.Metrics at the first call.
func (w *writer) collectionMeters(name string) *collMeters {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m, ok := w.meters[name]; ok {
		return m
	}
	m := &collMeters{name: name}
	if w.meters == nil {
		w.meters = map[string]*collMeters{}
	}
	w.meters[name] = m
	if w.reg != nil {
		w.reg.Meters().Set(collMetersKey{name}, m.fill)
	}
	return m
}

func (m *collMeters) fill(mm any) {
	x := mm.(*tipkv.Metrics)
	x.Collections = append(x.Collections, tipkv.CollectionMetrics{Name: m.name, Writes: m.writes.Load(), Removed: m.removed.Load()})
}
