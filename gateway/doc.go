// Package gateway turns a validated configuration into a running rate-limiting
// reverse proxy.
//
// A tour:
//
//   - [New] builds a [Gateway] from a *config.Config: one compiled route per
//     configured route (a matcher on path glob, methods, host and headers;
//     the route's limits as an httplimit.Middleware; then either a
//     httputil.ReverseProxy to the upstream or a fixed `respond` answer), the
//     store the config names, and the admin endpoints. Building dials
//     nothing: Redis connects lazily, and /readyz reports whether it answers.
//   - [Gateway.ServeHTTP] sends a request to the first route whose match
//     holds, or answers 404; every error answer has the problem+json shape of
//     docs/semantics.md §5.3.
//     The request's host and path are read once, by the path rules of
//     docs/operations.md: a path an upstream could read another way (a dot
//     or empty segment, a ";", a control character, an encoded slash unless
//     the route allows it) matches no route, and matching and strip_prefix
//     count the same segments.
//   - [Server] owns the public and admin listeners and the current Gateway.
//     [Server.Swap] replaces the gateway atomically on reload: new requests
//     go to the new one, and the old one is closed once its in-flight
//     requests finish. [Server.Shutdown] drains in-flight requests.
//
// The admin listener is package [github.com/sluice-gw/sluice/gateway/admin]:
// /healthz, /readyz and /metrics, and, behind the admin token, the admin
// API under /admin/v1/ and the dashboard at /admin/. The gateway hands it
// the fixed facts of its configuration and answers its narrow
// admin.Gateway interface (adminview.go): readiness, the store, the
// overrides table and the store's status. Overrides (overrides.go) live
// with the store: in process for memory, in a Redis hash that every
// instance re-reads every 250 ms for Redis, so a change reaches all
// instances within a second. The access log (accesslog.go) writes one slog
// record per sampled request.
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
//
// Request headers: the request line and headers are bounded at 16 KiB
// (server.max_header_bytes) with a JSON 431. Go's http.Server answers an
// oversize header block itself in plain text, so the Server lets it read up
// to twice the bound and the Gateway measures each request (request line,
// Host and every header as sent in HTTP/1.1) and answers 431 itself. Only
// header blocks beyond that get Go's plain-text 431; the server never
// buffers more than about twice the bound for a connection's headers.
//
// Connections: the public listener holds at most server.max_conns open
// connections, and at most server.max_conns_per_ip from one address when
// set (connlimit.go). The bound sits on the listener, below the engine: a
// connection past it is answered 503 (429 past the per-address bound) in
// problem+json and closed before the engine sees it.
package gateway
