package ratelimit

import "time"

// Decision is the outcome of one limit for one request. Being limited is a
// Decision with Allowed false, never an error.
type Decision struct {
	// Allowed reports whether this limit admits the request. In a set of limits
	// evaluated together, a limit may report Allowed while the request as a
	// whole is denied by another; then its state is unchanged.
	Allowed bool
	// Limit is the policy's capacity, limit or burst.
	Limit int64
	// Remaining is the whole number of units left after this request (or, when
	// nothing was consumed, left now), never negative. In shape mode it is the
	// queue room left.
	Remaining int64
	// Reset is how long until Remaining would be back at Limit if no further
	// request came.
	Reset time.Duration
	// RetryAfter is, for a denied request, how long until the same request could
	// be admitted; zero when allowed.
	RetryAfter time.Duration
	// Delay is how long shape mode holds an admitted request before forwarding
	// it; zero for every other algorithm and mode.
	Delay time.Duration
}

// micros converts microseconds to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
