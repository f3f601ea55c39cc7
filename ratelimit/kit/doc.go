// Package kit is the store author's side of package ratelimit, as
// database/sql/driver is the driver author's side of database/sql. A
// [ratelimit.Store] keeps one [State] per key and decides a request by
// running [StepAt] on it; this package holds that state, the step function
// of the six algorithms, [PeekAt], the [TTL] a stored state needs, the checks
// a Store runs on what it is given ([CheckRequests], [Cost]), a policy's
// integer parameters ([ParamsOf]) and the [ManualClock] on which exact
// timelines run in store tests, the conformance suite and simulations. Users
// of the limiter need it only to test against a clock that moves when told.
//
// # Steps
//
// [StepAt] is one decision: it takes the stored [State] of a key, the time
// in Unix microseconds and the cost, updates the state in place and writes a
// [ratelimit.Decision]. It never reads a clock and never stores anything: a
// denial leaves the state as it was, and the caller stores the new state
// only when admitted, keeping it for [TTL] of the decision, after which it is
// equivalent to no state at all. [PeekAt] reports the same decision without
// the request: Remaining and Reset as they are now.
//
// Every quantity is an integer below 2^53 (time in µs, units), so the Redis
// store's Lua scripts, which follow these steps line by line, compute the
// same values in doubles. docs/algorithms.md states the rule of each
// algorithm.
package kit
