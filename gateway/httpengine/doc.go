// Package httpengine is the gateway's net/http engine: it serves the
// public HTTPS listener (HTTP/1.1 and HTTP/2, chosen by ALPN) and HTTP/2
// by prior knowledge on the cleartext listener (h2c), where fastengine
// serves HTTP/1.1 (docs/layout.md, "Engines"). Like fastengine it is an
// adapter around the decision core: it reads each request into the core's
// view (core.Request, with the request's TLS state), has the core's Table
// decide it, and carries out the core.Outcome — the answer, or the proxy
// of the route's upstream on net/http's Transport, with the forwarding
// rules of core/forward.go. Its upstreams are spoken to in HTTP/1.1
// (http://, https://) or HTTP/2 (h2c://, h2://), with the route's
// upstream_tls. A gRPC call (grpc.go) has a deadline, the shorter of its
// grpc-timeout and the route's timeout, sent upstream and enforced on the
// whole call, and every answer the gateway makes to it is a gRPC status.
//
// What the wire alone can tell is checked here before the core decides:
// a header block over server.max_header_bytes (431), and an HTTP/2
// request whose Host header disagrees with its :authority (400). Go's
// server itself refuses malformed framing, connection-specific header
// fields in HTTP/2, and floods of resets and CONTINUATION frames.
package httpengine
