package kit

import (
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/internal/params"
)

// Params are a policy's parameters as the step functions compute with
// them: integers, time in microseconds. A store that runs the steps
// elsewhere (the Redis store's Lua scripts) passes these.
type Params struct {
	// Max is the policy's capacity, limit or burst ([ratelimit.Policy.Max]).
	Max int64
	// IntervalMicros is the microseconds per unit of rate, round(10^6/Rate)
	// and at least 1, for token_bucket, leaky_bucket and gcra; 0 otherwise.
	IntervalMicros int64
	// WindowMicros is the window in microseconds for fixed_window,
	// sliding_window and sliding_log; 0 otherwise.
	WindowMicros int64
	// MaxDelayMicros is shape mode's max delay in microseconds; 0 means
	// unbounded, and it is 0 for every other algorithm and mode.
	MaxDelayMicros int64
}

// ParamsOf returns p's parameters. p must not be nil.
func ParamsOf(p *ratelimit.Policy) Params {
	var q Params
	q.Max, q.IntervalMicros, q.WindowMicros, q.MaxDelayMicros = params.Of(p)
	return q
}

// policy is what a step reads of a Policy: the Policy itself and its
// integer parameters.
type policy struct {
	*ratelimit.Policy
	max, interval, window, maxDelay int64
}

// load fills q from p. It writes q in place: building a policy and copying
// it costs a store-forwarding stall on every step.
func (q *policy) load(p *ratelimit.Policy) {
	q.Policy = p
	q.max, q.interval, q.window, q.maxDelay = params.Of(p)
}

// mulSat returns a·b for non-negative a and b, saturated at 2^53, as the
// Lua scripts' mul_sat does.
func mulSat(a, b int64) int64 { return params.MulSat(a, b) }

// micros converts microseconds to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
