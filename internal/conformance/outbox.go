package conformance

// outboxCases returns the outbox tests.
func outboxCases() []Case { return nil }
