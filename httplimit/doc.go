// Package httplimit is sluice's rate limiting as plain net/http middleware:
// a [Middleware] wraps any http.Handler, so a Go service can enforce the
// same limits, with the same keys, headers and 429 answers, as the sluice
// gateway, without running the gateway.
//
// # A short tour
//
// A route has one or more [Limit] values. Each applies a
// [ratelimit.Policy] to a [Key] read from the request:
//
//	key, _ := httplimit.ParseKeys([]string{"header:X-User-Id"})
//	m, err := httplimit.New(httplimit.Options{
//		Route:  "api",
//		Store:  store, // memory.New(...) or a Redis store
//		Limits: []httplimit.Limit{{Policy: perUser, Key: key}},
//	})
//	http.Handle("/api/", m.Handler(apiHandler))
//
// Key parts are "header:NAME", "query:NAME", "ip", "route", "path" and
// "const:TEXT" ([ParseKey]), or a value a function of yours computes
// ([FuncKeyPart]: a cookie, a token's claim); a list of parts forms one key. Values are trimmed, and an
// absent or blank value makes the key empty: Limit.OnEmptyKey then denies
// with 403 (the default), counts the request in one shared anonymous budget,
// or skips the limit. "ip" believes X-Forwarded-For only from
// IPResolver.TrustedProxies, reading it from right to left. "header:Host"
// is the request's host as [NormalizeHost] gives it.
//
// Which policy applies to a key, first match wins: Options.Override (the
// gateway's admin API), Limit.Overrides, Limit.Plans, then Limit.Policy. Each
// (route, limit, policy, key) has its own budget; see [StateKey].
//
// All limits of a request are decided by one Store.Evaluate: the request is
// admitted only if every limit admits, and a denied request consumes from
// none. Shadow limits are evaluated and reported to Options.Observe but never
// deny and never show in headers.
//
// # Engines
//
// The decision does not depend on net/http: [Middleware.Decide] reads a
// [Request] (method, host, decoded path, query, headers, peer) and fills in
// a [Result] (forward or answer, the status and problem body, the
// rate-limit headers). [Middleware.Handler] is its net/http adapter
// ([HTTPRequest], [WriteResult]); the sluice gateway has another for its own
// listener, so both decide every request the same way. An engine that asks
// the store itself (sluice's Envoy rate limit service) turns the store's
// decisions into the same answer, Event and shape-mode hold with
// [Evaluated].
//
// # Responses
//
// Every response that went through a limit carries X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset for the most constrained
// limit, and the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-10) for every limit, for example
//
//	RateLimit-Policy: "per-user";q=10;w=10, "hourly";q=100;w=3600
//	RateLimit: "per-user";r=7;t=0, "hourly";r=97;t=0
//
// r is the whole number of units left and t, in seconds rounded up, how long
// until at least one more unit is available: zero while r is above zero,
// otherwise [ratelimit.Decision.Next], exact for every algorithm (for
// sliding_log, when the oldest entry leaves the window; for sliding_window,
// when the weighted count has dropped by one unit).
//
// A denied request gets 429 with Retry-After and an RFC 9457 problem body
// naming the violated policies; the wrapped handler is never called. Other
// errors use [WriteProblem]. A leaky bucket in shape mode holds an admitted
// request for its delay before calling the handler, and drops it if the
// client goes away meanwhile.
package httplimit
