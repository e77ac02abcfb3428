package versioned

// OnFilterWalk makes f run when a miss filter build is about to walk the
// collection, until the returned function is called. Not safe with
// parallel tests.
func OnFilterWalk(f func()) (restore func()) {
	onFilterWalk = f
	return func() { onFilterWalk = nil }
}

// OnFilterGrown makes f run after every background grow of a miss filter,
// until the returned function is called.
func OnFilterGrown(f func()) (restore func()) {
	onFilterGrown = f
	return func() { onFilterGrown = nil }
}

// FilterCap returns the capacity of the collection's miss filter, 0 if it
// has none.
func FilterCap[T any](c *Collection[T]) int64 {
	if c.filter == nil {
		return 0
	}
	if f := c.filter.cur.Load(); f != nil {
		return f.cap
	}
	return 0
}
