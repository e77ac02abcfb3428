package conformance

// documentCases returns the documents tests.
func documentCases() []Case { return nil }
