// Package redis is a [ratelimit.Store] on Redis (standalone, Sentinel or
// Cluster), so that several gateway instances share one budget per key.
//
// # Scripts
//
// Every request is decided in one Lua script run; on standalone and
// Sentinel, concurrent requests may share one (see Micro-batching). The
// script is assembled from embedded files: lua/core.lua (the scalar step of
// every algorithm but sliding_log, a line-by-line mirror of its Go step
// function in package ratelimit/kit, with the state encodings), then
// lua/prelude.lua (helpers), one file per algorithm (token_bucket.lua,
// leaky_bucket.lua, fixed_window.lua, sliding_log.lua, sliding_window.lua,
// gcra.lua: the general path's entries and the refunds; sliding_log.lua
// holds its own step), and lua/main.lua. The script reads Redis TIME once
// (so every instance uses Redis' clock, never its own), works in integer
// microseconds (exact in Lua's doubles, as every value stays below 2^53),
// decides every limit of the request without writing (phase 1) and, only if
// every non-shadow limit admits, writes each admitting limit's new state
// (phase 2). A denied request writes nothing. Tests may pass an explicit
// time instead of TIME ([Options].Clock), so the same timeline replays
// identically on the memory store and on Redis.
//
// Several limits of one request on the same key (and algorithm) are decided
// in order against the evolving state, so their costs add up, as in the
// memory store.
//
// Redis runs a script's whole text on every call, and in its Lua a table,
// a closure, a decimal tonumber (strtod), a string.format or a reply value
// each costs more than the arithmetic of a step. So a lone request with one
// limit (not a sliding_log) is decided by the end of core.lua, before the
// rest of the script defines anything, without tables, from five arguments
// in police mode, and answered with one integer when admitted with nothing
// held back; a batch decides such requests the same way, reads every key
// with one MGET when no key repeats in it, and takes them as one argument
// each. A request of two limits of those algorithms on two keys (a
// per-client limit and a global one, the gateway's common request) is
// decided by main.lua's decide2, with step1 and no tables, and in a batch
// answered with one short integer per limit when both admit with nothing
// held back. A batch in which keys repeat reads them all with one MGET
// too and writes each key once, at the end, with the value and TTL its
// last request left. Numeric policy arguments
// travel in hexadecimal (strtoul). The other algorithm files wrap their
// functions in one constructor that main.lua calls only for the algorithms
// the general path uses.
//
// It is sent as EVALSHA. On NOSCRIPT (after a restart or SCRIPT FLUSH; the
// script did not run) it is loaded once with SCRIPT LOAD for all the calls
// that got NOSCRIPT together (on Cluster, routed to the node serving the
// call's slot: one load per slot) and sent again as EVALSHA; only if that
// gets NOSCRIPT too is it sent as EVAL. Nothing else is ever re-sent: the
// client has retries disabled, because a script that timed out may have
// run and a retry would count the request twice. Each call is bounded by
// [Options].Timeout. Connections stay in pipelining mode, so a timed-out
// call abandons its reply without closing the connection other calls use.
//
// # Keys
//
// A limit's state lives in <prefix>:{<tag>}:<alg> (a sliding log adds a
// second key, <alg>:n), where tag is the first 128 bits of
// SHA-256(Request.Key), base64url-encoded. Every key of one limit thus sits
// in one Cluster hash slot, distinct request keys spread evenly over the
// slots, and no key value, whatever braces, colons or bytes it holds, can
// choose its slot, escape the prefix or share state with another value.
// Every key carries a TTL covering the time until its state is equivalent
// to no state at all (full bucket, empty window), plus 1ms, so an expired
// key never hands out budget a live one would not. Token bucket, leaky
// bucket, fixed window and gcra keys are kept in Redis' integer encoding
// when they can be (see lua/core.lua), which keeps a token bucket or
// gcra key under 100 bytes (MEMORY USAGE; 88 bytes with the default
// prefix). A token bucket, leaky bucket or fixed window whose count (tokens
// left, level, requests in the window) is 920 or more is stored as the
// string "count:time" instead, about 120 bytes, so the 100-byte goal holds
// for counts below 920; gcra's single integer has no such bound
// (TestMemoryUsage checks both). With an explicit test time
// ([Options].Clock) keys are kept an hour longer, as Redis' own clock runs
// on while a test's stands still.
//
// The exception is a token bucket with compat scg or scg-4.1
// ([ratelimit.CompatSCG], [ratelimit.CompatSCG41]): its state is Spring
// Cloud Gateway's, Request.Key (ratelimit.SCGRouteKey or ratelimit.SCGKey) plus
// ".tokens" and ".timestamp", with neither the prefix nor a hash, whole
// seconds and SCG's TTL, so that SCG instances share it (scg.go,
// lua/scg_token_bucket.lua, docs/migrating-from-scg.md). Such a request is
// one script call of its own; on Cluster all its limits must share SCG's
// slot, and a key value that splits SCG's two keys over two slots is a
// store error.
//
// # Leases
//
// A concurrency limit's leases are one sorted set per key (lua/concurrency.lua),
// decided in the same script call as the request's other limits. Release is
// one ZREM per lease. Renew sends every lease it is given in runs of
// lua/renew.lua of at most 100 leases, each run's keys in one Cluster hash
// slot, all at once (one round trip per node); a run extends each lease
// and adds back one its key no longer has (see [ratelimit.LeaseStore]).
//
// # Micro-batching (standalone and Sentinel)
//
// Redis runs one script at a time, and about half of a single-request
// call's Redis time is the call itself (running the script's text, TIME,
// the reply), not the request's own GET and SET. So a Store keeps at most
// two script calls in flight. An Evaluate that finds a slot free is sent
// alone, exactly as without batching (a lone caller is never batched, so it
// gains no latency); one that finds both busy joins the newest waiting
// batch. A batch goes as one script call (main.lua mode 'b' or 'B') when a call in
// flight ends, or in a call of its own once it has waited 2 ms (an eighth
// of the Timeout if that is less), so that slow calls (a slow network) lead
// to more calls in flight rather than to requests waiting a round trip for
// a slot. A batch holds at most 64 limits (more only when one request alone
// has more), which bounds how long one script holds Redis. BENCHMARKS.md §2
// has the figures.
//
// What callers see:
//
//   - Each request is still all-or-nothing over its own limits, with the
//     same semantics as a call of its own (shadow limits, several limits on
//     one key adding up), and is never split across calls. The script
//     decides a batch's requests one after another, each against the state
//     the ones before it left; the batch as a whole is atomic, which is
//     stronger.
//   - One time per batch: the script reads Redis TIME once and decides every
//     request of the batch at that microsecond. With an explicit test time
//     ([Options].Clock) only requests with the same time share a batch.
//   - Errors: if the call fails as a whole (timeout, connection, BUSY, a
//     failed reload after NOSCRIPT, a reply of the wrong shape), every
//     request in it gets that error, classified by [ErrorKind] as for a call
//     of its own. If deciding one request raises an error inside the script
//     (a key holding another program's value, OOM on its write), that
//     request alone gets it; what it wrote before the error stays, and the
//     other requests are decided as usual. A batch in which keys repeat
//     makes its writes at the end: if Redis refuses them (over maxmemory, a
//     replica: a server that refuses a script's first write refuses all),
//     every request in it gets that error.
//   - Timeouts: a caller waits no longer than its own context and the
//     Timeout counted from when its batch was opened (never longer than a
//     call of its own), and may then have been counted or not, as with a
//     call of its own. A batch is sent once and never re-sent; a request
//     whose context ended before its batch was sent is left out of it, and a
//     batch whose time is up before it is sent is not sent: those requests
//     are certainly not counted.
//
// On Cluster every call stays its own (a script cannot span hash slots).
//
// # Several limits: all-or-nothing
//
// On standalone and Sentinel, and on Cluster when every limit of a request
// hashes to one slot, one script run decides all of them atomically: either
// every limit consumes or none does.
//
// On Cluster, limits whose keys sit in different slots cannot share a
// script run. The store then uses commit-then-refund: it runs the script for
// each slot concurrently, each run atomically committing its own limits if
// they all admit; if every run admits, the request is admitted. If any run
// denies, the runs that committed are refunded by a second script that
// gives back exactly what this request took (tokens back up to the
// capacity, the leaky bucket level down, the window count down if that
// window is still current, the log entry removed by its unique member, the
// gcra TAT moved back), and the request is denied. What callers see:
//
//   - never more admissions than the limits allow: a refund only returns
//     units this request consumed;
//   - between the commit and the refund (one round trip), another request
//     on a committed limit may see those units taken and be denied although
//     it would have been admitted: the race window allows false denials,
//     never false admissions;
//   - if a refund fails (timeout, connection lost) it is not re-sent, as it
//     may have run; the units stay consumed until they refill or the key
//     expires (again only extra denials). If a slot's run itself fails, the
//     committed slots are refunded in the background with a fresh Timeout,
//     and Evaluate returns the error; the failed run may or may not have
//     consumed;
//   - decisions are reported as for one atomic evaluation: a limit that
//     committed and was refunded reports its state before the request.
//
// # Client
//
// The client is github.com/redis/rueidis, chosen by measurement against
// go-redis (BENCHMARKS.md §2; BenchmarkEvaluate measures this store). [New]
// dials nothing; the client is set up on first use (see [New]). Retries are
// off; timeouts are explicit (the call's context, a dial timeout, and a
// connection read/write timeout of max(1s, 10·Timeout) after which a stalled
// connection is replaced). On Cluster, rueidis refreshes its slot map on
// MOVED/ASK replies (which it follows at once: the script had not run),
// whenever a connection closes (connection refused or reset included), and
// every 5 s.
//
// On Sentinel the store writes only to the master the sentinels name: it
// follows a failover without a restart, never writes to a demoted or stale
// master, and keeps its master while the sentinels alone are down.
// docs/operations.md ("Sentinel") describes how, including users that may
// not run ROLE. Sentinels are reached with Options.SentinelUsername and
// SentinelPassword.
//
// On its first connection the store reads maxmemory-policy and logs one
// warning unless it is noeviction: an evicted key is a fresh budget. A user
// that may not run CONFIG skips the check.
//
// # Errors
//
// Errors are wrapped with the step that failed ("redis store: run script:
// …"). [ErrorKind] classifies them as timeout, connection, script or other
// for metrics, and errors for which the server said it cannot serve now
// (BUSY, OOM, LOADING, READONLY, CLUSTERDOWN, MASTERDOWN, …) wrap
// [ErrUnavailable].
package redis
