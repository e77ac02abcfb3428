// Package knobs holds the settings of tipkv's packages that only tests and
// benchmarks move: one struct per package, with its defaults, and hooks
// that are nil outside tests. It is internal so that users never see them,
// and shared so that a test outside the package (the conformance suite, a
// variant of it in the root package) can move them too.
//
// The packages read the knobs directly, as plain variables, without
// synchronisation: a hot path pays one load. So a test sets a knob before
// it opens the DBs and starts the goroutines that read it, and restores it
// after they are done (Set, with the restore in t.Cleanup or a defer that
// runs after the DBs close); tests that move knobs never run in parallel.
package knobs

import "github.com/tipkv/tipkv/engine"

// Versioned are package versioned's knobs.
var Versioned = struct {
	// DropRangeMin is the fewest versions or events dropped with one range
	// delete; fewer get point deletes. The default is 32 (versioned/drop.go
	// says why).
	DropRangeMin int
	// CacheEntries bounds the latest-version cache of a DB whose first
	// handle is made afterwards (Options.CacheEntries raises it): about
	// 340 bytes an entry, measured by TestVersionCacheEntryCost. The
	// default is 1<<16.
	CacheEntries int
	// StreamEntries bounds the feed streams whose positions a DB opened
	// afterwards keeps in memory (see versioned/positions.go). The default
	// is 1<<16.
	StreamEntries int

	// WrapIter wraps every iterator the package opens, to count its seeks.
	WrapIter func(engine.Iter) engine.Iter
	// TraceDelete sees every delete the package writes: [lo, hi) for a
	// range, hi nil for a point delete of lo.
	TraceDelete func(lo, hi []byte)
	// OnWait is called by every write that starts waiting for a document
	// or stream another Tx holds, and by a change of a collection's time
	// index state that waits for such a Tx.
	OnWait func()
	// OnWatchSleep is called by every Watch that has delivered what it may
	// and goes to sleep.
	OnWatchSleep func()
	// WatchWholeRange makes every wake-up of a Watch find the oldest
	// version by walking back from the end of the document's whole range,
	// over every dropped version not compacted away yet, as before issue
	// 30's fix (versioned/watch.go, watchFloor): a knob only so that
	// BenchmarkWatchPut can measure that path beside the bounded one.
	WatchWholeRange bool
	// OnFilterWalk runs when a miss filter build has marked its slot and
	// is about to walk the collection; OnFilterGrown after a background
	// grow ends.
	OnFilterWalk, OnFilterGrown func()
	// OnLearn runs when a read of a latest version is about to teach it
	// to the version cache (versioned's writer.learn).
	OnLearn func()
	// NoLearn turns writer.learn off, so that BenchmarkLatestCold can
	// pair a read that learns with one that does not.
	NoLearn bool
}{
	DropRangeMin:  32,
	CacheEntries:  1 << 16,
	StreamEntries: 1 << 16,
}

// Queue are package queue's knobs.
var Queue = struct {
	// ConsumedRangeMin is the shortest run of consecutive consumed
	// messages deleted with one range delete; shorter runs get point
	// deletes. The default is 128 (queue/receive.go says why).
	ConsumedRangeMin int
	// EnqueueWritesState makes every enqueue write the queue-state key
	// too. None does (see "Head, tail and crash consistency" in queue's
	// package doc): a knob only so that BenchmarkEnqueueState can measure
	// what that would cost.
	EnqueueWritesState bool
	// StateEvery is the most sequence numbers past the stored head that
	// consumes may cover before one of them writes the queue-state key
	// (on an exclusive engine; see "Head, tail and crash consistency" in
	// queue's package doc): after a crash, Open steps over at most that
	// many consumed positions. The default is 1024; tests lower it to
	// cross its boundary often.
	StateEvery int
	// BlockedRunMin is the fewest items behind their groups' windows, in
	// a row, that a read of a shared queue remembers as a run to pass
	// over (queue/groups.go). The default is 32.
	BlockedRunMin int
}{
	ConsumedRangeMin: 128,
	StateEvery:       1024,
	BlockedRunMin:    32,
}

// Set sets *k, one of the knobs, to v until the returned function is
// called.
func Set[T any](k *T, v T) (restore func()) {
	old := *k
	*k = v
	return func() { *k = old }
}
