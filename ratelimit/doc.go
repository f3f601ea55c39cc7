// Package ratelimit holds sluice's rate-limiting core as its users see it:
// policies, the [Decision] a limit returns, the [Clock] stores read, the
// [Store] contract and the [Limiter] facade. It needs only the standard
// library. Stores live in their own packages (store/memory, store/redis);
// what a store author needs to write one (the state, the six algorithms'
// step function, peek, TTL and the request checks) is package
// ratelimit/kit, as database/sql/driver is to database/sql; the conformance
// suite every store passes is ratelimit/ratelimittest.
//
// # Policies
//
// A [Policy] is a validated, immutable limit built by [NewPolicy] from a
// [PolicyConfig]. Each algorithm reads its own fields:
//
//	token_bucket    Capacity, Rate          bursts up to Capacity, refills Rate units/s
//	leaky_bucket    Capacity, Rate, Mode    a queue of Capacity that leaks Rate units/s;
//	                MaxDelay                police admits, shape holds each request its turn
//	fixed_window    Limit, Window           Limit units per window aligned to the Unix epoch
//	sliding_log     Limit, Window           Limit units in any (now−Window, now], exactly
//	sliding_window  Limit, Window           the two-counter estimate of the same
//	gcra            Burst, Rate             token_bucket(Burst, Rate)'s admissions in one number
//	concurrency     Limit, LeaseTTL         at most Limit requests of a key in flight (leases)
//
// NewPolicy reports every problem at once, each wrapping [ErrInvalidPolicy];
// [Policy.CheckCost] reports [ErrInvalidCost] for a cost outside 1..Max().
//
// # Decisions
//
// A [Decision] carries Allowed, Limit, Remaining (whole units after the
// request), Reset (until the limit is whole again), RetryAfter (the earliest
// time the same request would be admitted), Next (with nothing left, until
// one more unit is) and, in shape mode, Delay (how long to hold the
// request). These are exact, to the microsecond, in every algorithm.
//
// # Stores and the Limiter
//
// A [Store] keeps the states and evaluates the limits of one request
// all-or-nothing: the request is admitted when every non-shadow limit admits,
// and then every admitting limit consumes; otherwise nothing changes. A
// shadow limit is reported but never denies. Time is the store's own: callers
// never pass it (docs/semantics.md §1.1), so instances whose clocks disagree still
// share one budget correctly. The memory store runs the algorithms' step
// (ratelimit/kit's StepAt) under a shard lock on its injectable [Clock] (a
// ManualClock from ratelimit/kit in tests); the Redis store runs the same steps in Lua on
// Redis TIME. Both pass the same conformance suite, and replaying one
// timeline on both gives identical decisions.
//
// A [Limiter] is the small facade for one policy over many keys: Allow,
// AllowN, Peek and Reset.
//
// # Concurrency limits
//
// A [Concurrency] policy counts requests in flight rather than units over
// time. A [LeaseStore] (both stores are) decides it in the same Evaluate as
// the rate limits: an admitted request holds a lease, named by
// Request.Lease, until it is given back ([LeaseStore.Release]) or expires
// LeaseTTL after it was taken or last renewed ([LeaseStore.Renew]).
//
// # Exactness
//
// Every quantity is an integer below 2^53, so Go's int64 and the doubles of
// Redis' Lua compute the same values:
//
//   - Time is integer microseconds since the Unix epoch. A window must be a
//     whole number of microseconds.
//   - A rate becomes a whole number of microseconds per unit,
//     round(10^6/Rate): exact for 0.001/s (10^9 µs), 0.5/s or 10/s, rounded
//     for 3/s (333333 µs, 0.0001% fast). Bucket states keep whole units plus
//     the time of the last whole unit, so the partial progress towards the
//     next unit is never rounded away (docs/semantics.md §1.2: a leaky bucket at
//     0.5/s leaks exactly 3 units in 6 s however often it is looked at), and
//     refill is continuous, not in whole seconds.
//   - Capacities, limits, bursts and costs go up to 2^53 ([MaxAmount]) and
//     stay exact there (docs/semantics.md §1.2); gcra additionally needs
//     Burst·interval ≤ 2^52 µs. Computed durations saturate at 2^53 µs.
//   - The sliding-window estimate is a float64 computed in the same order on
//     both sides; RetryAfter is checked against it to the microsecond.
//   - Sliding-log entries are never merged: two requests in the same
//     microsecond are two entries (docs/semantics.md §2.7).
//   - A clock that goes backwards never mints budget: waits lengthen, and the
//     window algorithms keep counting in the newer window.
package ratelimit
