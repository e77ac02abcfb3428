package conformance

// queueCases returns the queues tests.
func queueCases() []Case { return nil }
