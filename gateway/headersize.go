package gateway

import "net/http"

// defaultMaxHeaderBytes is the default bound on the request line and headers
// (server.max_header_bytes).
const defaultMaxHeaderBytes = 16 << 10

// serverMaxHeaderBytes returns the http.Server.MaxHeaderBytes for a gateway
// bound of max bytes. Go answers an oversize header block itself with a
// plain-text 431, so to answer with the problem+json body of
// docs/semantics.md §5.3 the server reads up to twice the bound (Go adds 4096
// bytes of slack on top) and the gateway measures each request itself
// (headerBytes). Header blocks beyond that get Go's plain 431. The read limit
// is also what a connection may make the server buffer before its request is
// parsed: Go grows the buffer for an unfinished header line up to it, so it
// must stay a small multiple of the bound, never a fixed megabyte.
func serverMaxHeaderBytes(bound int) int { return 2 * bound }

// headerBytes returns the size of r's request line and header block as sent
// on the wire in HTTP/1.1 form: "METHOD URI PROTO\r\n", each "Name: value\r\n"
// (Host included) and the final "\r\n". Whitespace the client added around
// values is not counted, so the figure can be a few bytes below the bytes read.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n + 2
}
