// Package core is the gateway's decision core: one configuration's routes
// compiled into a [Table], which decides each request of the public
// listener into an [Outcome] value. It reads requests only through its own
// view, [Request], which an engine fills in (method, Host, raw target,
// peer) and backs with a [Wire] for the header fields; so it imports
// neither net, net/http nor an engine, and every engine (docs/layout.md)
// adapts the same value.
//
// [Table.Decide] parses the target by the path rules of docs/operations.md
// (a path an upstream could read another way matches no route), tries the
// routes in order (match.go), runs a route's load shedding (shed.go, with
// the upstreams' latency signals of latency.go) and its limits through
// httplimit, reads the original request a forward_auth route's auth
// request describes (forwardauth.go), and returns what the engine does:
// forward to the route's upstream with the limits' result and leases,
// answer with a status, headers and body (a refusal, a `respond` route's
// fixed answer, a forward-auth verdict, a 400 or 404 in the problem+json
// of docs/semantics.md), or nothing when the client went away during a
// shape-mode hold.
//
// The core also keeps a request's bookkeeping that no engine should copy:
// the access log record (accesslog.go), the trace span's decision
// attributes (trace.go) and the panics recorder ([Panics]).
package core
