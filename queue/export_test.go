package queue

// Waiting returns the number of goroutines sleeping in q's Wait.
func Waiting[T any](q *Queue[T]) int {
	q.c.mu.Lock()
	defer q.c.mu.Unlock()
	return q.c.sleepers
}

// setKnob sets *k, one of knobs' fields, to v until the returned function
// is called.
func setKnob[T any](k *T, v T) (restore func()) {
	old := *k
	*k = v
	return func() { *k = old }
}
