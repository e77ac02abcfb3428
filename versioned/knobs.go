package versioned

import "github.com/tipkv/tipkv/engine"

// knobs are the package's settings that only tests and benchmarks move,
// gathered here with their defaults: the sizes below, and hooks that are
// nil outside tests. export_test.go's setters change one and return a
// function that restores it; nothing else writes them. They are read
// without synchronisation: a test sets them before it starts the
// goroutines that read them, and restores them after they are done, so
// tests that set one do not run in parallel.
var knobs = struct {
	// dropRangeMin is the fewest versions or events dropped with one
	// range delete; fewer get point deletes (see defaultDropRangeMin).
	dropRangeMin int
	// cacheEntries bounds the latest-version cache of a DB whose first
	// handle is made afterwards (Options.CacheEntries raises it): about
	// 340 bytes an entry, measured by TestVersionCacheEntryCost.
	cacheEntries int
	// streamEntries bounds the feed streams whose positions a DB opened
	// afterwards keeps in memory (see positions).
	streamEntries int

	// wrapIter wraps every iterator the package opens, to count its seeks.
	wrapIter func(engine.Iter) engine.Iter
	// traceDelete sees every delete the package writes: [lo, hi) for a
	// range, hi nil for a point delete of lo.
	traceDelete func(lo, hi []byte)
	// onWait is called by every write that starts waiting for a document
	// or stream another Tx holds.
	onWait func()
	// onWatchSleep is called by every Watch that has delivered what it may
	// and goes to sleep.
	onWatchSleep func()
	// onFilterWalk runs when a miss filter build has marked its slot and
	// is about to walk the collection; onFilterGrown after a background
	// grow ends.
	onFilterWalk, onFilterGrown func()
	// onLearn runs when a read of a latest version is about to teach it
	// to the version cache (writer.learn).
	onLearn func()
}{
	dropRangeMin:  defaultDropRangeMin,
	cacheEntries:  1 << 16,
	streamEntries: 1 << 16,
}
