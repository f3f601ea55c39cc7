package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testkit"
)

// The wire door rows: what the public listener does with a request that
// asks to switch protocols, expects 100-continue, stretches the HTTP/1.1
// grammar or meets a failing or HTTP/1.0 upstream (docs/operations.md,
// "Answers sluice gives itself" and "The HTTP engine"). The rows of
// TestDoorWire are regression rows: each failed before its fix.

// bigAnswer is the length of the upstream's large answer: over the 1 MiB the
// upgrade path once read whole.
const bigAnswer = 2 << 20

// wireAnswer is the upstream of the wire rows: /big answers bigAnswer bytes
// ending in "END", /slow/ answers after 3 s (past its route's timeout),
// /old/len and /old/eof answer in HTTP/1.0 (with a length, and ended by
// closing the connection); anything else gets the default answer.
func wireAnswer(req *http.Request, _ []byte) (string, bool) {
	p := req.URL.Path
	switch {
	case strings.HasSuffix(p, "/big"):
		body := strings.Repeat("x", bigAnswer-3) + "END"
		if req.Method == http.MethodHead {
			body = ""
		}
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", bigAnswer, body), false
	case strings.HasPrefix(p, "/slow/"):
		time.Sleep(3 * time.Second) // past the route's 1 s timeout, bounded
		return "", true
	case p == "/old/len":
		return "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nold answer", true
	case p == "/old/eof":
		return "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nold answer until close", true
	}
	return "", false
}

// refusedURL returns the URL of a loopback address nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	return "http://" + testkit.ClosedAddr(t)
}

// wireConfig is the config of the wire rows: limited routes to up (a 2 s
// timeout, short enough for a row to see a 504 on a wait that should not
// happen), a limited route whose upstream answers too late, one whose
// upstream refuses connections, and an HTTP/1.0 upstream's route. No route
// takes any other path.
func wireConfig(up, refused string) string {
	return `
server:
  listen: "127.0.0.1:0"
  shutdown_timeout: 10s
  read_header_timeout: 3s
admin:
  listen: "127.0.0.1:0"
policies:
  once: {algorithm: token_bucket, capacity: 1, rate: 0.0001}
  ten:  {algorithm: token_bucket, capacity: 10, rate: 0.0001}
routes:
  - id: login
    match: {path: /login}
    upstream: ` + up + `
    limits: [{policy: once, key: header:X-User-Id}]
  - id: api
    match: {path: /api/**}
    upstream: ` + up + `
    timeout: 2s
    limits: [{policy: ten, key: header:X-User-Id}]
  - id: slow
    match: {path: /slow/**}
    upstream: ` + up + `
    timeout: 1s
    limits: [{policy: ten, key: header:X-User-Id}]
  - id: down
    match: {path: /down/**}
    upstream: ` + refused + `
    limits: [{policy: ten, key: header:X-User-Id}]
  - id: old
    match: {path: /old/**}
    upstream: ` + up + `
`
}

// The reasons rows leave out HTTP/2.
const (
	// noUpgradeInHTTP2: HTTP/2 has no Upgrade (RFC 9113 §8.6); the
	// Connection and Upgrade fields such a row sends are malformed in
	// HTTP/2, which TestHTTP2Doors' connection-specific rows cover.
	noUpgradeInHTTP2 = "HTTP/2 has no Upgrade mechanism (RFC 9113 §8.6): Connection and Upgrade are malformed there, covered by TestHTTP2Doors"
	// http1Framing: the row is about HTTP/1.1's message syntax (request
	// line, header lines, Content-Length and Transfer-Encoding), which
	// HTTP/2's frames do not have.
	http1Framing = "HTTP/1.1 message syntax (request line, header lines, body framing) that HTTP/2 frames do not carry"
)

// goRefusesHead: over HTTPS/1.1, Go's server refuses a head it cannot
// parse itself, before any handler: the same status, in text/plain.
var goRefusesHead = doorDiff{
	why: "Go's net/http server refuses this head itself, before any handler, in text/plain",
	set: func(r *doorRow) {
		r.header = map[string]string{"Content-Type": "~text/plain", "X-RateLimit-Remaining": absent}
	},
}

// refusalEndsTheStream: over HTTP/2 an answer before the body ends the
// request's stream, not the connection: the body the client may still be
// sending is refused on that stream alone, and other streams go on.
var refusalEndsTheStream = doorDiff{
	why: "over HTTP/2 the answer ends the stream, not the connection: the body still to come is refused on that stream alone",
	set: func(r *doorRow) { r.closes, r.keeps = false, true },
}

// onHTTP2 is the differs map of a row that differs alike over h2 and h2c.
func onHTTP2(d doorDiff) map[string]doorDiff { return map[string]doorDiff{protoH2: d, protoH2C: d} }

// bareLFServed is how HTTPS/1.1 answers a head with bare LF line ends: Go's
// net/http server reads a bare LF as a line end (RFC 9112 §2.2 lets a
// recipient), so the request is an ordinary one, its key header read (user)
// and forwarded with CRLF line ends, where fasthttp's 400 (or 408) keeps
// it from an upstream that would read it another way.
func bareLFServed(user string) doorDiff {
	return doorDiff{
		why: "Go's net/http server reads a bare LF as a line end (RFC 9112 §2.2) and serves the request, which goes upstream re-serialised with CRLF",
		set: func(r *doorRow) {
			r.status = []int{200}
			r.header = quota
			r.body = "upstream /api/a"
			r.closes, r.keeps = false, true
			r.upstream = 1
			r.upSees = []string{"GET /api/a HTTP/1.1\r\n", "\r\nX-User-Id: " + user + "\r\n"}
			r.upNot = []string{"\n\n"}
		},
	}
}

// quota is the rate-limit headers of the first request of a key on a
// route with policy ten.
var quota = map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "9", "RateLimit-Policy": "~10"}

// withHeaders returns m and extra in one map.
func withHeaders(m map[string]string, extra map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func TestDoorWire(t *testing.T) {
	t.Parallel()
	up := newWireUpstream(t, wireAnswer)
	var rows []doorRow
	rows = append(rows, upgradeRows()...)
	rows = append(rows, expectRows()...)
	rows = append(rows, parserRows()...)
	rows = append(rows, failureRows()...)
	rows = append(rows, http10UpstreamRows()...)
	rows = append(rows, sizeRows()...)
	rows = append(rows, framingRows()...)
	runDoorRows(t, wireConfig(up.URL, refusedURL(t)), up, 9, rows)
}

// upgradeRows: only an HTTP/1.1 GET with Connection: upgrade and an Upgrade
// other than h2c takes the tunnel path.
func upgradeRows() []doorRow {
	return []doorRow{
		{
			name:      "upgrade/a HEAD asking to upgrade is an ordinary HEAD",
			protocols: http1Only,
			excluded:  withoutHTTP2(noUpgradeInHTTP2),
			send:      []string{"HEAD /api/big HTTP/1.1\r\nHost: x\r\nX-User-Id: up-1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"},
			status:    []int{200},
			header:    withHeaders(quota, map[string]string{"Content-Length": fmt.Sprint(bigAnswer)}),
			keeps:     true,
			upstream:  1,
			upSees:    []string{"HEAD /api/big HTTP/1.1"},
			upNot:     []string{"websocket", "pgrade\r\n"},
		},
		{
			name:      "upgrade/a POST asking to upgrade is proxied with its body and a large answer streamed",
			protocols: http1Only,
			excluded:  withoutHTTP2(noUpgradeInHTTP2),
			send: []string{"POST /api/big HTTP/1.1\r\nHost: x\r\nX-User-Id: up-2\r\nConnection: upgrade\r\nUpgrade: websocket\r\n" +
				"Content-Length: 5\r\n\r\nhello"},
			status:   []int{200},
			header:   quota,
			body:     "xxxEND",
			keeps:    true,
			upstream: 1,
			upSees:   []string{"POST /api/big HTTP/1.1", "\r\n\r\nhello"},
			upNot:    []string{"websocket"},
		},
		{
			name:      "upgrade/a GET upgrade the upstream declines gets its large answer streamed",
			protocols: http1Only,
			excluded:  withoutHTTP2(noUpgradeInHTTP2),
			send:      []string{"GET /api/big HTTP/1.1\r\nHost: x\r\nX-User-Id: up-3\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"},
			status:    []int{200},
			header:    quota,
			body:      "xxxEND",
			upstream:  1,
			upSees:    []string{"Upgrade: websocket"},
		},
		{
			name:      "upgrade/h2c is not tunnelled: the request goes without its Upgrade",
			protocols: http1Only,
			excluded:  withoutHTTP2(noUpgradeInHTTP2),
			send:      []string{"GET /api/plain HTTP/1.1\r\nHost: x\r\nX-User-Id: up-4\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"},
			status:    []int{200},
			body:      "upstream /api/plain",
			keeps:     true,
			upstream:  1,
			upNot:     []string{"h2c", "HTTP2-Settings"},
		},
		{
			name:      "upgrade/an HTTP/1.0 request asking to upgrade is an ordinary one",
			protocols: http1Only,
			excluded:  withoutHTTP2(noUpgradeInHTTP2),
			send:      []string{"GET /api/ten HTTP/1.0\r\nHost: x\r\nX-User-Id: up-5\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"},
			status:    []int{200},
			body:      "upstream /api/ten",
			upstream:  1,
			upNot:     []string{"websocket"},
		},
	}
}

// expectRows: a request with Expect: 100-continue is decided before 100
// Continue; a refusal is its final answer, as without Expect, and closes
// the connection.
func expectRows() []doorRow {
	post := "POST /login HTTP/1.1\r\nHost: x\r\nX-User-Id: %s\r\nContent-Length: 5\r\n\r\nhello"
	expect := "POST /login HTTP/1.1\r\nHost: x\r\nX-User-Id: %s\r\nContent-Length: 2000000\r\nExpect: 100-continue\r\n\r\n"
	return []doorRow{
		{
			name:     "expect/a refused upload is refused before 100 Continue, with the refusal's headers and body",
			send:     []string{fmt.Sprintf(post, "ex-1"), fmt.Sprintf(expect, "ex-1")},
			status:   []int{200, 429},
			header:   map[string]string{"Content-Type": "application/problem+json", "Retry-After": "~", "X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0"},
			body:     `"status":429`,
			closes:   true,
			differs:  onHTTP2(refusalEndsTheStream),
			upstream: 1,
		},
		{
			name:     "expect/an upload no route takes is answered 404 before 100 Continue",
			send:     []string{"PUT /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\nExpect: 100-continue\r\n\r\n"},
			status:   []int{404},
			header:   map[string]string{"Content-Type": "application/problem+json"},
			closes:   true,
			differs:  onHTTP2(refusalEndsTheStream),
			upstream: 0,
		},
	}
}

// parserRows: what the engine's parser lets through is refused before any
// limit is charged, and versions other than HTTP/1.0 and 1.1 get their
// answer.
func parserRows() []doorRow {
	return []doorRow{
		{
			name:      "parser/a header name that is not a token is 400",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			send:      []string{"GET /api/a HTTP/1.1\r\nHost: x\r\nX User Id: p-1\r\n\r\n"},
			status:    []int{400},
			header:    map[string]string{"X-RateLimit-Remaining": absent},
			upstream:  0,
		},
		{
			name:      "parser/Connection naming Content-Length is 400",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			send:      []string{"POST /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: p-2\r\nConnection: keep-alive, Content-Length\r\nContent-Length: 5\r\n\r\nhello"},
			status:    []int{400},
			header:    map[string]string{"X-RateLimit-Remaining": absent},
			closes:    true,
			upstream:  0,
		},
		{
			name:      "parser/Connection naming Transfer-Encoding is 400",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			send:      []string{"POST /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: p-3\r\nConnection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
			status:    []int{400},
			closes:    true,
			upstream:  0,
		},
		{
			name:      "parser/HTTP/2.0 on the request line is 505",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			differs: map[string]doorDiff{protoHTTPS: {
				why: "Go's net/http server answers a request line whose major version is not 1 itself, in text/plain, before any handler",
				set: func(r *doorRow) {
					r.header = map[string]string{"Content-Type": "~text/plain", "X-RateLimit-Remaining": absent}
				},
			}},
			send:     []string{"GET /api/a HTTP/2.0\r\nHost: x\r\nX-User-Id: p-4\r\n\r\n"},
			status:   []int{505},
			header:   map[string]string{"Content-Type": "application/problem+json", "X-RateLimit-Remaining": absent},
			closes:   true,
			upstream: 0,
		},
		{
			name:      "parser/HTTP/0.9 on the request line is 505",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			send:      []string{"GET /api/a HTTP/0.9\r\nHost: x\r\nX-User-Id: p-5\r\n\r\n"},
			status:    []int{505},
			closes:    true,
			upstream:  0,
		},
		{
			name:      "parser/HTTP/1.2 is served and forwarded as HTTP/1.1",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			send:      []string{"GET /api/v12 HTTP/1.2\r\nHost: x\r\nX-User-Id: p-6\r\n\r\n"},
			status:    []int{200},
			header:    quota,
			body:      "upstream /api/v12",
			proto:     "HTTP/1.1",
			keeps:     true,
			upstream:  1,
			upSees:    []string{"GET /api/v12 HTTP/1.1\r\n"},
		},
		{
			name:      "parser/a header line ended by a bare LF is 400",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			differs:   map[string]doorDiff{protoHTTPS: bareLFServed("p-7")},
			send:      []string{"GET /api/a HTTP/1.1\r\nHost: x\nX-User-Id: p-7\r\n\r\n"},
			status:    []int{400},
			header:    map[string]string{"X-RateLimit-Remaining": absent},
			upstream:  0,
		},
	}
}

// failureRows: a limited route's 502 and 504 carry the rate-limit headers
// of the decision that admitted the request.
func failureRows() []doorRow {
	return []doorRow{
		{
			name:     "failure/a 504 carries the quota headers",
			send:     []string{"GET /slow/a HTTP/1.1\r\nHost: x\r\nX-User-Id: f-1\r\n\r\n"},
			status:   []int{504},
			header:   withHeaders(quota, map[string]string{"Content-Type": "application/problem+json"}),
			upstream: 1,
		},
		{
			name:     "failure/a 502 carries the quota headers",
			send:     []string{"GET /down/a HTTP/1.1\r\nHost: x\r\nX-User-Id: f-2\r\n\r\n"},
			status:   []int{502},
			header:   withHeaders(quota, map[string]string{"Content-Type": "application/problem+json"}),
			upstream: 0,
		},
		{
			name:      "failure/an upgrade's 502 carries the quota headers",
			protocols: http1Only,
			excluded:  withoutHTTP2(noUpgradeInHTTP2),
			send:      []string{"GET /down/ws HTTP/1.1\r\nHost: x\r\nX-User-Id: f-3\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"},
			status:    []int{502},
			header:    quota,
			upstream:  0,
		},
	}
}

// http10UpstreamRows: an HTTP/1.0 upstream's answer reaches the client as
// an HTTP/1.1 answer, on a connection kept as the client asked.
func http10UpstreamRows() []doorRow {
	return []doorRow{
		{
			name:     "http10/an HTTP/1.0 answer with a length goes out as HTTP/1.1, the connection kept",
			send:     []string{"GET /old/len HTTP/1.1\r\nHost: x\r\n\r\n"},
			status:   []int{200},
			body:     "old answer",
			proto:    "HTTP/1.1",
			keeps:    true,
			upstream: 1,
		},
		{
			name:     "http10/an HTTP/1.0 answer ended by close goes out as HTTP/1.1, the connection kept",
			send:     []string{"GET /old/eof HTTP/1.1\r\nHost: x\r\n\r\n", "GET /old/len HTTP/1.1\r\nHost: x\r\n\r\n"},
			status:   []int{200, 200},
			body:     "old answer",
			proto:    "HTTP/1.1",
			keeps:    true,
			upstream: 2,
		},
	}
}

// TestDoorWireHeld checks answers that already held before these rows
// were fixed, and that the fixes must keep: an admitted Expect: 100-continue upload is
// decided once and gets its 100, and a header block that ends in a bare-LF
// blank line is never complete to the engine: 408 at read_header_timeout
// (1 s here, well within the runner's 5 s wait for an answer).
func TestDoorWireHeld(t *testing.T) {
	t.Parallel()
	up := newWireUpstream(t, wireAnswer)
	runDoorRows(t, strings.Replace(wireConfig(up.URL, refusedURL(t)), "read_header_timeout: 3s", "read_header_timeout: 1s", 1), up, 1, []doorRow{
		{
			name: "expect/an admitted upload gets 100 Continue, is decided once and forwarded",
			send: []string{
				"POST /login HTTP/1.1\r\nHost: x\r\nX-User-Id: held-1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
				"POST /login HTTP/1.1\r\nHost: x\r\nX-User-Id: held-1\r\nContent-Length: 5\r\n\r\nhello",
			},
			status:   []int{100, 200, 429},
			header:   map[string]string{"X-RateLimit-Remaining": "0"},
			upstream: 1,
			upSees:   []string{"\r\n\r\nhello"},
		},
		{
			name:      "parser/a head in bare LFs throughout is 408 at read_header_timeout",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			differs:   map[string]doorDiff{protoHTTPS: bareLFServed("held-2")},
			send:      []string{"GET /api/a HTTP/1.1\nHost: x\nX-User-Id: held-2\n\n"},
			status:    []int{408},
			closes:    true,
			upstream:  0,
		},
	})
}

// sizeRows: a header block over server.max_header_bytes (16384 here) is
// 431 in problem+json on every protocol, before any limit is charged,
// whether one field or many make it up (over HTTP/2 the block of one 17 KiB
// field takes a HEADERS and a CONTINUATION frame).
func sizeRows() []doorRow {
	var many strings.Builder
	for i := range 100 {
		fmt.Fprintf(&many, "X-Field-%d: %s\r\n", i, strings.Repeat("b", 200))
	}
	return []doorRow{
		{
			name:     "size/one 17 KiB header field is 431",
			send:     []string{"GET /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: s-1\r\nX-Big: " + strings.Repeat("a", 17<<10) + "\r\n\r\n"},
			status:   []int{431},
			header:   map[string]string{"Content-Type": "application/problem+json", "X-RateLimit-Remaining": absent},
			body:     "16384",
			upstream: 0,
		},
		{
			name:     "size/100 header fields of 200 bytes are 431",
			send:     []string{"GET /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: s-2\r\n" + many.String() + "\r\n"},
			status:   []int{431},
			header:   map[string]string{"Content-Type": "application/problem+json", "X-RateLimit-Remaining": absent},
			body:     "16384",
			upstream: 0,
		},
		{
			name:     "size/a header block just under the bound is served",
			send:     []string{"GET /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: s-3\r\nX-Big: " + strings.Repeat("a", 15<<10) + "\r\n\r\n"},
			status:   []int{200},
			header:   quota,
			upstream: 1,
			upSees:   []string{"X-Big: aaaa"},
		},
	}
}

// framingRows: requests that try to make the gateway and the upstream
// disagree on where a request ends (TestHostileSmuggling has more) are
// refused before any limit, or read one way only: what follows a request
// is never read as another one, and the upstream gets one request each
// way. They are HTTP/1.1's syntax; over HTTPS/1.1 Go's server parses them,
// and refuses what it refuses itself, in text/plain.
func framingRows() []doorRow {
	const smuggled = "GET /api/smuggled HTTP/1.1\r\nHost: x\r\nX-User-Id: fr\r\n\r\n"
	hidden := "GET /api/hidden HTTP/1.1\r\nHost: x\r\n\r\n"
	refused := map[string]string{"Content-Type": "application/problem+json", "X-RateLimit-Remaining": absent}
	row := func(name, raw string, status int) doorRow {
		r := doorRow{
			name:      "framing/" + name,
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			send:      []string{raw},
			status:    []int{status},
			closes:    true,
			upstream:  0,
			upNot:     []string{"smuggled"},
		}
		if status >= 400 {
			r.header = refused
			r.differs = map[string]doorDiff{protoHTTPS: goRefusesHead}
		} else {
			r.header = quota
			r.upstream = 1
			r.upSees = []string{"POST /api/a HTTP/1.1\r\n"}
		}
		return r
	}
	// Go's server reads a request with both Content-Length and
	// Transfer-Encoding by Transfer-Encoding but keeps the connection, and
	// drops Content-Length before any handler could tell: the bytes after
	// it are read by the gateway as a request of its own, decided and
	// forwarded as one (the gateway and the upstream still agree on where
	// each request ends).
	keptAfterCLTE := doorDiff{
		why: "Go's net/http server keeps the connection after a request with Content-Length and Transfer-Encoding, and hides the Content-Length from the handler",
		set: func(r *doorRow) {
			r.closes = false
			r.upstream = 2
			r.upSees = []string{"POST /api/a HTTP/1.1\r\n", "GET /api/smuggled HTTP/1.1\r\n"}
			r.upNot = nil
		},
	}
	clte := row("Content-Length and Transfer-Encoding: chunked wins and the connection closes after the answer",
		"POST /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-1\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+smuggled, 200)
	tecl := row("Transfer-Encoding and a Content-Length covering a second request",
		"POST /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-2\r\nTransfer-Encoding: chunked\r\nContent-Length: 58\r\n\r\n0\r\n\r\n"+smuggled, 200)
	clte.differs = map[string]doorDiff{protoHTTPS: keptAfterCLTE}
	tecl.differs = map[string]doorDiff{protoHTTPS: keptAfterCLTE}
	return []doorRow{
		clte,
		tecl,
		row("two Content-Length values are 400",
			"POST /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-3\r\nContent-Length: 5\r\nContent-Length: 58\r\n\r\nhello"+smuggled, 400),
		row("Content-Length -1 is 400",
			"POST /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-4\r\nContent-Length: -1\r\n\r\n"+smuggled, 400),
		row("Transfer-Encoding chunked twice is 501",
			"POST /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-5\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+smuggled, 501),
		row("Transfer-Encoding identity is 501",
			"POST /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-6\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello", 501),
		row("a NUL in a header value is 400",
			"GET /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-7\x00b\r\n\r\n", 400),
		row("a CR alone in a header value is 400",
			"GET /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-8\r"+smuggled, 400),
		{
			name:      "framing/an obs-fold line continues the field before it",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			send:      []string{"GET /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-9\r\nX-Folded: a\r\n b\r\nContent-Length: 0\r\n\r\n"},
			status:    []int{200},
			header:    quota,
			keeps:     true,
			upstream:  1,
			upSees:    []string{"X-Folded: a b\r\n"},
		},
		{
			name:      "framing/a request in a body is the body",
			protocols: http1Only,
			excluded:  withoutHTTP2(http1Framing),
			send:      []string{fmt.Sprintf("POST /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: fr-10\r\nContent-Length: %d\r\n\r\n%s", len(hidden), hidden)},
			status:    []int{200},
			header:    quota,
			keeps:     true,
			upstream:  1,
			upSees:    []string{"\r\n\r\n" + hidden},
		},
	}
}
