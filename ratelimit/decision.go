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
	// Next is, when Remaining is zero, how long until at least one more unit
	// is available if no further request came: the RetryAfter a request of
	// cost 1 would get now. It is zero while Remaining is above zero. Where
	// Reset says when the whole limit is back, Next says when the first unit
	// is: for sliding_log when the oldest entry leaves the window, for
	// sliding_window when the weighted count has dropped by one unit. It is
	// what the IETF RateLimit field's t reports (package httplimit).
	Next time.Duration
	// Uncounted reports that no store decided this limit: the request was
	// admitted without counting it, as store/fallback's Allow mode does
	// while its store is unavailable, or it was denied for another limit
	// without asking the store, as store/localdeny does for a key known
	// denied (Allowed is then true: this limit's own verdict is unknown).
	// Remaining, Reset and Next then say nothing about the budget, and the
	// HTTP middleware sends no quota headers for the limit. A Store's own
	// decisions never set it.
	Uncounted bool
}
