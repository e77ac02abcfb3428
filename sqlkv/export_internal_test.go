package sqlkv

import (
	"time"

	"github.com/tipkv/tipkv"
	"github.com/tipkv/tipkv/internal/link"
)

// SetParkFor sets how long the stores opened next keep a finished read
// view's connection parked, and returns a function that restores it.
func SetParkFor(d time.Duration) (restore func()) {
	old := parkFor
	parkFor = d
	return func() { parkFor = old }
}

// NotifyWatches is the number of watches of db's store that wait for
// notifications.
func NotifyWatches(db *tipkv.DB) int {
	st, err := link.StoreOf(db)
	if err != nil {
		panic(err)
	}
	h := st.(*Store).hub
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}
