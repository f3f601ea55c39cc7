// Package fastengine is the public listener's fasthttp engine, the one
// package of sluice that imports fasthttp (docs/layout.md). It reads each
// request off the wire into the decision core's view (core.Request, with
// the exchange as its core.Wire), makes the checks only the wire can make
// (HTTP version, header block size, framing: headersize.go, version.go),
// has the core decide, and carries out the core.Outcome (handler.go): the
// answer, or the reverse proxy to the route's upstream (proxy.go, one
// fasthttp HostClient pool per upstream in upstream.go, bodies streamed
// both ways, Upgrade tunnels).
//
// The server (engine.go) streams request bodies, answers what the engine
// itself refuses in problem+json, bounds its connections on the listener
// (connlimit.go: server.max_conns and server.max_conns_per_ip, refused
// before the engine sees them) and closes them lingering, as Go's server
// does. A request with Expect: 100-continue is decided once, before 100
// Continue (expect.go). Panics are recovered at the handler, in the
// goroutines a request starts and while an answer streams (panics.go),
// counted through core.Panics.
//
// Request headers: the request line and headers are bounded at 16 KiB
// (server.max_header_bytes) with a JSON 431. The engine's read buffer holds
// up to about twice the bound (headersize.go), so the handler measures each
// request itself and names the configured bound exactly; a header block
// beyond the buffer gets the same JSON 431 from the engine's error handler.
package fastengine
