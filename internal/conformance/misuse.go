package conformance

// misuseCases returns the misuse tests.
func misuseCases() []Case { return nil }
