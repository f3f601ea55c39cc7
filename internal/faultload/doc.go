// Package faultload is the load-and-fault harness of docs/reliability.md: it
// starts a Redis topology (through internal/redistest), an upstream and the
// sluice binary on loopback, offers a fixed request rate for a bounded time,
// injects a fault mid-run and computes the figures its rows
// ask for: 5xx count, latency percentiles before, during and after the
// fault, admissions on an exact accounting key against its budget, and the
// time until decisions are back on Redis.
//
// The e2e fault tests run short versions of the scenarios; cmd faultbench
// (bench/cmd/faultbench) runs the long ones and prints the reports. The
// package is internal and meant for tests and tools only: it starts
// processes and generates load, and imports internal/redistest.
//
// Faults come from the Redis processes themselves (kill, SIGSTOP, CONFIG
// SET, CLIENT KILL, SCRIPT FLUSH, a busy script, failovers, resharding) or
// from [Proxy], a TCP proxy in front of Redis that delays replies (with
// jitter), resets connections or blackholes them. The rows are in
// scenarios.go, faults.go and rows.go (A6 with Redis healthy, C4 with the
// sentinels down and a second gateway started meanwhile, C5 with
// min-replicas-to-write and a stopped replica).
//
// # How the figures are measured
//
// The load is open-loop: request i is sent at start + i/rate whatever the
// earlier ones are doing, 40% of them on one accounting key (route "acct":
// token bucket, rate L = 20% of the total rate, burst B = L, so the key is
// offered 2L and stays saturated), the rest over 1,000 background keys
// (route "bg", never limited) and a route with no limits ("free").
//
// "Back on Redis" follows docs/reliability.md (at least 99% of decisions made
// on Redis): /metrics is scraped every 100 ms, and the answer is the first
// scrape after the reference time (the fault's end, or the fault's start
// for failovers) from which sluice_fallback_decisions_total{route="bg"}
// grew by at most 1% of sluice_requests_total{route="bg"}, both in the next
// interval and over the next second. It is read on the background keys
// because the accounting key, offered twice its rate, keeps owing the
// fallback's admissions after an outage: store/fallback decides it
// local-first (and counts its local denials as fallback decisions) for as
// long as it stays saturated, by design (no fresh budget after an outage).
// Fallback decisions later than one second after that are reported as
// relapses (spurious breaker openings of a loaded machine), not as a late
// recovery.
//
// Over-admission is counted on the accounting key in the window from the
// fault's start to 5 s after its end: allowed must be at most
// 1.1·L·T + k·B, k = 1 (one burst) or 2 when the fault loses Redis' state
// (a restart without persistence, a failover).
package faultload
