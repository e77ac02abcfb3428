package queue

// knobs are the package's settings that only tests and benchmarks move,
// gathered here with their defaults. export_test.go's setKnob changes one
// and returns a function that restores it; nothing else writes them. They
// are read without synchronisation: a benchmark sets them between rounds,
// while no enqueue or consume runs.
var knobs = struct {
	// consumedRangeMin is the shortest run of consecutive consumed
	// messages deleted with one range delete; shorter runs get point
	// deletes (see defaultConsumedRangeMin).
	consumedRangeMin int
	// enqueueWritesState makes every enqueue write the queue-state key
	// too. None does (see "Head, tail and crash consistency" in the
	// package doc): a knob only so that BenchmarkEnqueueState can measure
	// what that would cost.
	enqueueWritesState bool
}{
	consumedRangeMin: defaultConsumedRangeMin,
}
