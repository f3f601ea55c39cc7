package gateway

import "net/http"

// defaultMaxHeaderBytes is SPEC §4's bound on the request line and headers.
const defaultMaxHeaderBytes = 16 << 10

// serverHeaderSlack is how far above a gateway's own bound the http.Server's
// MaxHeaderBytes is set. Go answers an oversize header block itself with a
// plain-text 431 (and it adds 4096 bytes of slack to MaxHeaderBytes); to
// answer with SPEC §4's JSON body instead, the server reads up to the bound
// plus this slack and the gateway measures each request itself (headerBytes).
// Only header blocks beyond bound+slack+4096 bytes get Go's plain answer.
const serverHeaderSlack = 1 << 20

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
