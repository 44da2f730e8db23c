package sqldb

// What the external tests of this package look into.
var (
	Retryable   = retryable
	MaxAttempts = maxAttempts
	Classify    = classify
)
