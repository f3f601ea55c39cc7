// Package gateway turns a validated configuration into a running rate-limiting
// reverse proxy: it composes the parts and runs the listeners.
//
// A tour (docs/layout.md has the layers and which engine serves which
// listener):
//
//   - [New] builds a [Gateway] from a *config.Config: the store the
//     configuration names behind its on_error wrappers (store.go,
//     redis.go), the decision core's route table (package
//     [github.com/sluice-gw/sluice/gateway/core]), the engine's handler
//     for the public listener (package
//     [github.com/sluice-gw/sluice/gateway/fastengine]), the admin handler
//     and Envoy's rate limit service (rls.go). Building dials nothing: Redis
//     connects lazily, and /readyz reports whether it answers.
//   - Every public request is read once by the engine into the core's
//     view and decided by the core into a value, which the engine carries
//     out: the proxy to the route's upstream, a fixed `respond` answer, a
//     forward-auth verdict or a refusal. Forward-auth routes are decided by
//     the same core path as proxied ones.
//   - [Server] owns the public, admin and rate-limit-service listeners and
//     the current Gateway. [Server.Swap] replaces the gateway atomically on
//     reload: new requests go to the new one, and the old one is closed once
//     its in-flight requests finish. [Server.Shutdown] drains in-flight
//     requests.
//
// The admin listener runs on net/http and is package
// [github.com/sluice-gw/sluice/gateway/admin]: /healthz, /readyz and
// /metrics, and, behind the admin token, the admin API under /admin/v1/ and
// the dashboard at /admin/. The gateway hands it the fixed facts of its
// configuration and answers its narrow admin.Gateway interface
// (adminview.go): readiness, the store, the overrides table and the store's
// status. Overrides (overrides.go) live with the store: in process for
// memory, in a Redis hash that every instance re-reads every 250 ms for
// Redis, so a change reaches all instances within a second.
//
// Reloads keep every key's budget: a new gateway whose store section equals
// the old one's (for memory: any memory store) shares the old store (see
// [Deps].Previous).
//
// Every store (Redis, memory, or one injected through [Deps].Store) sits
// behind store/fallback, the one home of store.on_error, which feeds the
// store-error and fallback metrics; /readyz asks it whether the instance
// should take traffic. The gateway holds the result as one handle, the
// store and its status (store.go); only the store wiring knows the kind.
package gateway
