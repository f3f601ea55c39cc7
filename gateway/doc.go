// Package gateway turns a validated configuration into a running rate-limiting
// reverse proxy.
//
// A tour:
//
//   - [New] builds a [Gateway] from a *config.Config: one compiled route per
//     configured route (a matcher on path glob, methods, host and headers;
//     the route's limits as httplimit limits; then a proxy to the upstream,
//     a fixed `respond` answer or a forward-auth verdict), the store the
//     config names, and the admin endpoints. Building dials nothing: Redis
//     connects lazily, and /readyz reports whether it answers.
//   - The public listener runs on fasthttp (engine.go: the server, its
//     timeouts, the answers the engine gives itself in problem+json).
//     Each request is read once into a publicRequest (view.go), the
//     gateway's httplimit.Request; servePublic and serve (public.go) bound
//     its header block, check its framing, parse its target by the path
//     rules of docs/operations.md, and send it to the first route whose
//     match holds, or answer 404. A path an upstream could read another way
//     (a dot or empty segment, a ";", a control character, an encoded slash
//     unless the route allows it) matches no route, and matching and
//     strip_prefix count the same segments. Every error answer has the
//     problem+json shape of docs/semantics.md.
//   - A route decides its limits through httplimit (the same decision the
//     net/http middleware makes), then proxies (proxy.go: one fasthttp
//     HostClient pool per upstream in upstream.go, bodies streamed both
//     ways, Upgrade tunnels), answers with `respond` (respond.go), or, on a
//     forward_auth route, answers the verdict on the original request that
//     the auth request describes (forwardauth.go).
//   - [Server] owns the public, admin and rate-limit-service listeners and
//     the current Gateway. [Server.Swap] replaces the gateway atomically on
//     reload: new requests go to the new one, and the old one is closed once
//     its in-flight requests finish. [Server.Shutdown] drains in-flight
//     requests. docs/layout.md says which engine serves which listener.
//
// The admin listener runs on net/http and is package
// [github.com/sluice-gw/sluice/gateway/admin]: /healthz, /readyz and
// /metrics, and, behind the admin token, the admin API under /admin/v1/ and
// the dashboard at /admin/. The gateway hands it the fixed facts of its
// configuration and answers its narrow admin.Gateway interface
// (adminview.go): readiness, the store, the overrides table and the store's
// status. Overrides (overrides.go) live with the store: in process for
// memory, in a Redis hash that every instance re-reads every 250 ms for
// Redis, so a change reaches all instances within a second. The access log
// (accesslog.go) writes one slog record per sampled request. Envoy's rate
// limit service (package rls) decides on the same store (rls.go).
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
// (server.max_header_bytes) with a JSON 431. The engine's read buffer holds
// up to about twice the bound (headersize.go), so the gateway measures each
// request itself (request line and every header as sent) and names the
// configured bound exactly; a header block beyond the buffer gets the same
// JSON 431 from the engine's error handler. A connection never makes the
// server buffer more than about twice the bound for its headers.
//
// Connections: the public listener holds at most server.max_conns open
// connections, and at most server.max_conns_per_ip from one address when
// set (connlimit.go). The bound sits on the listener, below the engine: a
// connection past it is answered 503 (429 past the per-address bound) in
// problem+json and closed before the engine sees it.
package gateway
