// Package fallback is a [ratelimit.Store] that decides on a shared primary
// store (Redis) while it works, and with a configured fallback while it does
// not (docs/semantics.md §6).
//
// # Store failures and the breaker
//
// Every call to the primary is bounded by Options.Timeout. A call that
// errors or runs out of time is a store failure (Options.Classify may narrow
// that), and the request it belonged to is decided by the fallback instead:
// no request ever gets an error because the store failed, except in Deny
// mode, where it gets one wrapping [ErrUnavailable].
//
// A circuit breaker (github.com/sony/gobreaker/v2) stops calling a failing
// primary: Options.ConsecutiveFailures failures in a row open it (a
// connection failure of a call that was already in flight when an earlier
// connection failure was counted is the same broken connection and does not
// count again, so one connection reset never opens it alone; timeouts and
// server errors count one by one), and while
// it is open every request goes straight to the fallback, paying nothing for
// the dead store. After Options.OpenTimeout (at most one second) the breaker
// lets exactly one probe through: the next request calls the primary while
// every concurrent request still goes to the fallback at once, never
// waiting. The probe's success closes the breaker and decisions are back on
// the primary; its failure opens the breaker for another OpenTimeout. So a
// store that recovers is used again within OpenTimeout plus one call
// (docs/semantics.md §6.2), without a restart, and a store that is down when the
// process starts is handled the same way.
//
// Not store failures, and returned to the caller unchanged: invalid requests
// ([ratelimit.ErrInvalidCost], a nil policy), which are checked before the
// primary is called, and the caller's own context ending (the client went
// away), which returns ctx.Err(). Neither counts for or against the breaker.
//
// # In-process primaries
//
// A primary marked Options.InProcess (the memory store, or a store a test
// injects) answers or fails at once: each call goes straight to it, with no
// breaker and no timeout, and each failure is decided by the mode as above.
// So store.on_error means the same whatever the store, and has this one
// home.
//
// # Modes
//
//   - [Local]: the request is decided by the Local store (in process) with
//     the same policies.
//   - [Allow]: the request is admitted; each Decision is marked Uncounted
//     (and reports the policy's full limit as Remaining), so that the HTTP
//     middleware sends no quota headers for a budget nobody counted.
//   - [Deny]: Evaluate returns an error wrapping [ErrUnavailable]; the HTTP
//     middleware answers 503 with Retry-After: 1.
//
// Options.OnFallback is called once for every request decided without the
// primary, for sluice_fallback_decisions_total.
//
// # The local fallback adds no budget
//
// A fallback that starts from a full local bucket would mint a fresh burst
// each time the breaker opens; and even one that starts from the right
// state double-spends: what the local store admits during an outage is
// unknown to the primary, whose budget refilled meanwhile, so after each
// recovery the primary hands the same units out again. With a client
// hammering one key and the store flapping, that adds the fallback's share of
// the time to the admitted rate (docs/reliability.md row B11 is such a
// flapping store). In Local mode the Store prevents both, for the requests
// this instance sees:
//
//  1. While the primary works, every limit it admits is also recorded on the
//     Local store (one local Evaluate, its verdict ignored, each limit
//     consuming on its own if it can). The local state thus holds this
//     instance's recent consumption, and the first fallback decision
//     continues from it: no fresh burst when the breaker opens.
//  2. Every key the fallback admits a request for is remembered as owing
//     (a debt), until its local state would be back to full
//     ([kit.TTL] of its last local decision). A request that touches
//     an owing key is decided local-first even when the primary works: the
//     Local store decides (and consumes); only if it admits is the primary
//     asked, and the request is admitted only if both admit. Units admitted
//     during the outage therefore stay spent after recovery. A key that keeps
//     being used keeps owing; an idle one is forgotten once its local state
//     is full, when the primary cannot be ahead any more either. A request
//     the Local store denies this way is answered without asking the primary,
//     so it is a decision made without the store and counted by OnFallback
//     (docs/semantics.md §6.5), even though the primary works; one the Local
//     store admits and the primary denies keeps its local charge (extra
//     denials, never extra admissions). A half-open probe is only sent by
//     a request the primary is actually asked about.
//
// The result: one instance alone on a key never admits more than one budget
// (burst) plus rate·T over any period T, however often the store flaps (the
// package's TestFlapping checks it over ten flaps), up
// to the few units by which the two stores' clocks may differ. The residual
// over-admission, documented rather than prevented:
//
//   - With N instances sharing a key, each local store knows only its own
//     instance's traffic, so during an outage the fallback admits up to N
//     budgets plus N·rate·T in all (each instance limits per instance:
//     docs/semantics.md §6.4), and after recovery each instance's owing keys are
//     gated only by its own share.
//   - A call that timed out may still have run on the primary: that request
//     is then charged on both stores (extra denials, never extra admissions).
//   - The debts are capped at Options.MaxDebtKeys keys; keys decided by the
//     fallback beyond that are not remembered and may be granted again by
//     the primary, at most what the fallback admitted for them.
//   - A Redis restart that loses the state hands out a fresh budget on the
//     primary; the local record limits keys this instance owes, no others.
//
// Allow and Deny modes keep no local state.
//
// # Concurrency
//
// A Store is safe for concurrent use. Hooks are called without any lock
// held, on the goroutine of the call that caused them; OnStateChange calls
// are serialized and report each change of [Store.Active] at least once
// (two changes in quick succession may be reported as the last one only).
package fallback
