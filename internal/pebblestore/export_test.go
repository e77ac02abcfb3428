package pebblestore

// SetMaxBatchBytes lowers the batch limit for a test and returns a func
// that restores it.
func SetMaxBatchBytes(n int) func() {
	old := maxBatchBytes
	maxBatchBytes = n
	return func() { maxBatchBytes = old }
}
