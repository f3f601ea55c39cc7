// Package localdeny is a [ratelimit.Store] that answers, without asking the
// store it wraps, requests it already knows to be denied: once the store
// has denied a key until T, a later request for that key is denied on this
// instance until T, so an abusive client costs no call to a shared store
// (docs/semantics.md §6.6).
//
// # What is remembered
//
// For each limit the inner store denies (Decision.Allowed false, not a
// shadow limit), the Store remembers, under the limit's state key: the
// policy, the request's cost c, and T = t0 + RetryAfter, where t0 is this
// process's clock read just before the inner call. A later request that
// includes a non-shadow limit on that key, with the same *Policy and a cost
// of at least c, before T, is answered here:
//
//   - the remembered limit gets a denial derived from the remembered one:
//     RetryAfter is T − now, Reset and Next are aged by the time since t0
//     (floored at zero), Remaining and Limit are as the store reported them;
//   - every other remembered limit of the request that matches is answered
//     the same way; each remaining limit is answered Allowed with Uncounted
//     set, as a limit no store decided (its Remaining and Limit are the
//     policy's full budget and mean nothing; the HTTP middleware sends no
//     header for it);
//   - nothing is consumed anywhere: a denied request consumes from none of
//     its limits, which the inner store would not have changed either.
//
// A shadow limit is never remembered and never looked up: a request is
// answered here only for a limit that would deny it. A policy change (an
// override, a plan, a reload that builds new policies) changes the state key
// or the *Policy, so the request is not a match and goes to the store. A
// limit whose key occurs twice in one request is not remembered from it:
// such limits are decided one after the other against the evolving state
// (docs/semantics.md §3), so the second one's denial is not one a request of
// that cost alone would get.
//
// # Why a remembered denial holds until T
//
// Every algorithm's RetryAfter is the earliest time at which the same
// request would be admitted if nothing else happened (docs/semantics.md §2),
// and for every algorithm the set of requests a key denies only shrinks as
// time passes and only grows as units are consumed:
//
//   - token_bucket and gcra admit once enough whole units have refilled;
//     consumption takes units away;
//   - leaky_bucket (police, and shape) admits once the level has leaked low
//     enough for the cost to fit, and in shape mode with max_delay once the
//     queue's wait is within max_delay; both fall with time and rise with
//     each admission;
//   - fixed_window denies until the window ends, and its count only grows
//     within a window;
//   - sliding_log admits once enough of the oldest entries have left the
//     window; new entries are newer;
//   - sliding_window's estimate falls monotonically with time (its bisection
//     finds the first microsecond at which it admits) and grows with each
//     admission.
//
// A larger cost needs at least as much. So, absent anything that frees
// budget (an admin reset, a Redis restart or eviction, a Cluster refund of
// units taken by a request that was denied), the inner store denies every
// request this Store answers, and never before T would it admit the
// remembered one: answering locally never admits anything, and denies no
// longer than the store itself would. t0 is taken before the call, so T is
// early by the call's latency rather than late: the first request after T
// may still be denied by the store, never the reverse. Anything that frees
// budget early is not seen here before T; [Store.Reset] forgets the keys it
// resets on this instance, other instances keep their remembered denials
// until their T.
//
// # Memory and cost
//
// At most Options.MaxKeys keys are remembered, split over 64 independently
// locked shards. A key is kept as a 128-bit digest under secret per-Store
// seeds (as store/memory keeps its keys; the chance of two keys sharing a
// digest is bounded there) plus six words, whatever the key's length. A
// remembered key is dropped once it is looked up at or after its T, by a
// sweep that visits one shard per call at most every SweepInterval/64 (so
// every shard about every SweepInterval while requests come), and, when a
// new denial finds its shard full, by a sweep of that shard; if nothing in
// it has expired, the entry that expires first makes room. While nothing is
// remembered a request costs a clock read and an atomic load; otherwise
// also a lookup per non-shadow limit (two seeded hashes, one shard lock).
// Answering a request locally allocates nothing.
//
// # Where it sits
//
// The gateway wraps the Redis store, with store.on_error applied
// (store/fallback), in this Store (store.local_deny). Options.Skip is then
// the fallback's Engaged: while requests are being decided without Redis,
// denials are not remembered, because a local fallback's denial counts this
// instance's traffic only. [Store.Over] gives a route its own view, with its
// own inner store (the fallback's per-route view) and hook, on one shared
// set of remembered keys.
package localdeny
