package queue

// Waiting returns the number of goroutines sleeping in q's Wait.
func Waiting[T any](q *Queue[T]) int {
	q.c.mu.Lock()
	defer q.c.mu.Unlock()
	return q.c.sleepers
}
