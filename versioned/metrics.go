package versioned

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
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
		link.MetersOf[tipkv.Metrics](w.reg).Set(collMetersKey{name}, m.fill)
	}
	return m
}

func (m *collMeters) fill(x *tipkv.Metrics) {
	x.Collections = append(x.Collections, tipkv.CollectionMetrics{Name: m.name, Writes: m.writes.Load(), Removed: m.removed.Load()})
}

// dbMeters are the DB-wide counters of this package in this process:
// feed appends and the retention passes (tipkv.FeedMetrics,
// tipkv.RetentionMetrics).
type dbMeters struct {
	appends                               atomic.Uint64
	feedPasses, feedFailures, trimmed     atomic.Uint64
	purgePasses, purgeFailures, purgedDoc atomic.Uint64
	groupsDropped                         atomic.Uint64
	stale                                 staleGauge
}

type dbMetersKey struct{}

func (m *dbMeters) fill(x *tipkv.Metrics) {
	x.Feeds = tipkv.FeedMetrics{Appends: m.appends.Load(), Retentions: m.stale.figures()}
	x.Retention = tipkv.RetentionMetrics{
		FeedPasses: m.feedPasses.Load(), FeedFailures: m.feedFailures.Load(), StreamsTrimmed: m.trimmed.Load(),
		PurgePasses: m.purgePasses.Load(), PurgeFailures: m.purgeFailures.Load(), DocumentsPurged: m.purgedDoc.Load(),
		GroupsDropped: m.groupsDropped.Load(),
	}
}

// pass counts one retention pass that ended with err; a pass cancelled
// by its context (Close) is not a failure.
func countPass(passes, failures *atomic.Uint64, err error) {
	passes.Add(1)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, tipkv.ErrClosed) {
		failures.Add(1)
	}
}
