// Package admin is sluice's admin listener: /healthz, /readyz and /metrics,
// and, behind the admin token, the admin API under /admin/v1/ (peek at and
// reset a key's limits, per-key policy overrides, the dashboard's
// statistics) and the dashboard at /admin/ (one embedded page drawing with
// the vendored uPlot, under a strict Content-Security-Policy).
//
// [New] serves one gateway: the fixed facts of its configuration come in
// [Options], and what changes while it runs (readiness, the store, the
// overrides table, the store's status) through the [Gateway] interface the
// gateway implements. [Stats] counts each route's decisions and finds the
// most limited keys of the last few minutes in bounded memory (topk.go);
// [Logins] limits failed logins per client address and outlives reloads.
// Handlers return errors; writeAPIError renders them, the one place admin
// errors get their JSON.
package admin
