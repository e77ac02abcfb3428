package versioned

// SetOnWatchSleep sets the hook called by every Watch that goes to sleep
// (nil: none). Tests only, not in parallel.
func SetOnWatchSleep(f func()) { onWatchSleep = f }
