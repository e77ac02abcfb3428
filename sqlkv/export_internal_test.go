package sqlkv

import (
	"time"
)

// SetParkFor sets how long the stores opened next keep a finished read
// view's connection parked, and returns a function that restores it.
func SetParkFor(d time.Duration) (restore func()) {
	old := parkFor
	parkFor = d
	return func() { parkFor = old }
}

// NotifyWatches is the number of watches of s that wait for
// notifications.
func NotifyWatches(s *Store) int {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}
