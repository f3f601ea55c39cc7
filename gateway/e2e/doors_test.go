package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testcert"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// The door rows: each row is raw request bytes written to the built binary's
// public listener, and what must come out — the statuses and headers the
// client reads, whether the gateway closes the connection, and the bytes the
// upstream received. A row names the protocols it applies to, so that every
// engine of the public listener reruns the same rows; a protocol a row
// excludes comes with the reason.

// Protocols a door row may name.
const (
	protoHTTP1 = "http/1.1"  // cleartext HTTP/1.1 on the public listener
	protoHTTPS = "https/1.1" // HTTP/1.1 over TLS (ALPN http/1.1) on server.tls.listen
	protoH2    = "h2"        // HTTP/2 over TLS (ALPN h2) on server.tls.listen
	protoH2C   = "h2c"       // HTTP/2 by prior knowledge on the public listener
)

// doorProtocols are the protocols the runner speaks.
var doorProtocols = []string{protoHTTP1, protoHTTPS, protoH2, protoH2C}

// http1Only are the protocols an HTTP/1.1-framing row applies to.
var http1Only = []string{protoHTTP1, protoHTTPS}

// withoutHTTP2 is the excluded map of a row that HTTP/2 cannot carry, for
// the reason why.
func withoutHTTP2(why string) map[string]string {
	return map[string]string{protoH2: why, protoH2C: why}
}

// isHTTP2 reports whether proto speaks HTTP/2.
func isHTTP2(proto string) bool { return proto == protoH2 || proto == protoH2C }

// absent, as a wanted header value, means the header must not be there.
const absent = "\x00absent"

// doorRow is one wire-level case.
type doorRow struct {
	name string
	// protocols the row applies to; nil means every protocol in doorProtocols.
	protocols []string
	// excluded says why a protocol is left out, per protocol.
	excluded map[string]string
	// differs changes the row's expectations for a protocol whose engine
	// answers otherwise by design, with the reason.
	differs map[string]doorDiff

	// send holds raw requests written one after another on one connection,
	// each after the previous answer was read. The last one may be only a
	// request head (an Expect: 100-continue row, say). Over HTTP/2 each is
	// one stream of the connection (h2Request says how it is translated).
	send []string
	// status holds the statuses the client must read, in order, interim
	// (1xx) answers included. Nil means: do not check.
	status []int
	// header holds headers the last answer must carry with exactly this value
	// (absent: must not carry); prefix "~" means: contains.
	header map[string]string
	// body is a substring the last answer's body must hold.
	body string
	// proto is the protocol version of the last answer's status line
	// ("HTTP/1.1"); empty means do not check. HTTP/2 answers have no status
	// line: over h2 and h2c the runner checks that the answer came in
	// HTTP/2 frames instead.
	proto string
	// closes: the gateway must close the connection after the last answer
	// (over HTTP/2: send GOAWAY or close it); keeps: it must keep it open
	// (over HTTP/1.1: it does not close it within 2 s; over HTTP/2: a new
	// stream on it is served). Neither means do not check.
	closes, keeps bool
	// upstream is the number of requests the upstream must have received
	// during the row; -1 means do not check.
	upstream int
	// upSees and upNot are substrings that the bytes the upstream received
	// during the row must and must not hold.
	upSees, upNot []string
}

// doorDiff is how a protocol's expectations differ from the row's.
type doorDiff struct {
	why string
	set func(r *doorRow)
}

// doorAnswer is one answer as the client read it.
type doorAnswer struct {
	status int
	proto  string
	header http.Header
	body   string
}

// doorGateway is a sluice process serving the door rows: cleartext HTTP/1.1
// and h2c on its public listener, HTTPS (HTTP/1.1 and HTTP/2) on its TLS
// listener, all with the same routes.
type doorGateway struct {
	*proc
	clear, secure string // host:port of the public and TLS listeners
	pool          *x509.CertPool
}

// httpsListening finds the TLS listener's address in the "sluice listening"
// log line.
var httpsListening = regexp.MustCompile(`sluice listening.* https=(\S+)`)

// startDoors starts sluice on yaml, whose server section it extends with
// server.max_header_bytes (16384), server.tls (a self-signed certificate
// for 127.0.0.1, on a free port) and server.http2 (h2c on, at most streams
// concurrent streams per connection).
func startDoors(t *testing.T, yaml string, streams int) *doorGateway {
	t.Helper()
	certFile, keyFile, pool := testcert.SelfSigned(t, t.TempDir())
	extra := fmt.Sprintf("server:\n  max_header_bytes: 16384\n  tls:\n    listen: \"127.0.0.1:0\"\n"+
		"    certificates: [{cert_file: %q, key_file: %q}]\n  http2: {h2c: true, max_concurrent_streams: %d}\n",
		certFile, keyFile, streams)
	i := strings.Index(yaml, "\nserver:\n")
	if i < 0 {
		t.Fatal("the config has no server section")
	}
	yaml = yaml[:i+1] + extra + yaml[i+len("\nserver:\n"):]
	p := start(t, yaml)
	m := httpsListening.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("sluice did not log its HTTPS listener:\n%s", p.logs)
	}
	return &doorGateway{proc: p, clear: hostAddr(p.base), secure: m[1], pool: pool}
}

// runDoorRows runs rows for every protocol each row names, each protocol
// against a gateway of its own started on yaml (startDoors), so that no
// protocol's rows find the limits another one's spent; the gateway must
// forward to up. It logs how many rows ran per protocol; every row
// scheduled must run to its end, and every protocol must run at least
// atLeast rows, so that a runner that skips rows silently fails.
func runDoorRows(t *testing.T, yaml string, up *wireUpstream, atLeast int, rows []doorRow) {
	t.Helper()
	ran, scheduled := map[string]int{}, map[string]int{}
	for _, proto := range doorProtocols {
		t.Run(proto, func(t *testing.T) {
			g := startDoors(t, yaml, 100)
			for _, r := range rows {
				protos := r.protocols
				if protos == nil {
					protos = doorProtocols
				}
				if !slices.Contains(protos, proto) {
					if r.excluded[proto] == "" {
						t.Errorf("row %q leaves out %s without a reason", r.name, proto)
					}
					continue
				}
				if d, ok := r.differs[proto]; ok {
					if d.why == "" || d.set == nil {
						t.Errorf("row %q differs over %s without a reason or a change", r.name, proto)
						continue
					}
					r.header = maps.Clone(r.header)
					d.set(&r)
				}
				scheduled[proto]++
				t.Run(r.name, func(t *testing.T) {
					runDoorRow(t, g, proto, up, r)
					if !t.Skipped() {
						ran[proto]++
					}
				})
			}
		})
	}
	for _, proto := range doorProtocols {
		t.Logf("door rows run over %s: %d", proto, ran[proto])
		if ran[proto] != scheduled[proto] {
			t.Errorf("%d of the %d door rows over %s ran to their end", ran[proto], scheduled[proto], proto)
		}
		if ran[proto] < atLeast {
			t.Errorf("%d door rows ran over %s, want at least %d", ran[proto], proto, atLeast)
		}
	}
}

// doorConn is one client connection of a door row.
type doorConn interface {
	// exchange sends one raw request and reads its answers: interim ones
	// and the final one. An error after some answers means the exchange
	// ended there.
	exchange(raw string) ([]doorAnswer, error)
	// closed reports whether the gateway closes the connection (over
	// HTTP/2: or sends GOAWAY) within 2 s.
	closed() bool
	// serving reports whether the connection stays open for more.
	serving() bool
	Close() error
}

// dialDoor opens a connection of proto to g.
func dialDoor(t *testing.T, g *doorGateway, proto string) doorConn {
	t.Helper()
	switch proto {
	case protoHTTP1:
		c, err := net.DialTimeout("tcp", g.clear, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return &h1Conn{c: c, br: bufio.NewReader(c)}
	case protoHTTPS:
		c := dialTLS(t, g, "http/1.1")
		return &h1Conn{c: c, br: bufio.NewReader(c)}
	case protoH2, protoH2C:
		return dialH2(t, g, proto)
	}
	t.Fatalf("unknown protocol %s", proto)
	return nil
}

// dialTLS opens a TLS connection to g's TLS listener that negotiates alpn.
func dialTLS(t *testing.T, g *doorGateway, alpn string) *tls.Conn {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		Config: &tls.Config{RootCAs: g.pool, ServerName: "127.0.0.1", NextProtos: []string{alpn}}}
	c, err := d.Dial("tcp", g.secure)
	if err != nil {
		t.Fatal(err)
	}
	tc := c.(*tls.Conn)
	if got := tc.ConnectionState().NegotiatedProtocol; got != alpn {
		tc.Close()
		t.Fatalf("TLS negotiated %q, want %q", got, alpn)
	}
	return tc
}

// h1Conn is an HTTP/1.1 connection, cleartext or TLS: raw bytes written,
// answers read as they come.
type h1Conn struct {
	c  net.Conn
	br *bufio.Reader
}

func (h *h1Conn) exchange(raw string) ([]doorAnswer, error) {
	if _, err := io.WriteString(h.c, raw); err != nil && !isReset(err) {
		return nil, fmt.Errorf("writing: %w", err)
	}
	return readAnswers(h.c, h.br, requestMethod(raw))
}

func (h *h1Conn) closed() bool  { return closedByPeer(h.c, h.br) }
func (h *h1Conn) serving() bool { return !closedByPeer(h.c, h.br) }
func (h *h1Conn) Close() error  { return h.c.Close() }

func runDoorRow(t *testing.T, g *doorGateway, proto string, up *wireUpstream, r doorRow) {
	t.Helper()
	up.reset()
	c := dialDoor(t, g, proto)
	defer c.Close()
	var answers []doorAnswer
	for i, raw := range r.send {
		got, err := c.exchange(raw)
		answers = append(answers, got...)
		if err != nil {
			if i < len(r.send)-1 {
				t.Fatalf("request %d: %v (answers so far %v)", i, err, statuses(answers))
			}
			if r.status != nil && len(got) == 0 {
				t.Logf("request %d: %v", i, err)
			}
			break
		}
	}
	if r.status != nil && !slices.Equal(statuses(answers), r.status) {
		t.Errorf("statuses %v, want %v", statuses(answers), r.status)
	}
	if len(answers) > 0 {
		last := answers[len(answers)-1]
		for name, want := range r.header {
			got, ok := last.header[http.CanonicalHeaderKey(name)]
			switch {
			case want == absent:
				if ok {
					t.Errorf("answer carries %s: %q, want none", name, got)
				}
			case strings.HasPrefix(want, "~"):
				if !strings.Contains(strings.Join(got, ", "), want[1:]) {
					t.Errorf("answer header %s = %q, want it to contain %q", name, got, want[1:])
				}
			default:
				if strings.Join(got, ", ") != want {
					t.Errorf("answer header %s = %q, want %q", name, got, want)
				}
			}
		}
		if !strings.Contains(last.body, r.body) {
			t.Errorf("answer body %q, want it to hold %q", trunc(last.body), r.body)
		}
		switch {
		case isHTTP2(proto):
			if last.proto != "HTTP/2.0" {
				t.Errorf("answer came as %s, want HTTP/2.0", last.proto)
			}
		case r.proto != "" && last.proto != r.proto:
			t.Errorf("answer's status line says %s, want %s", last.proto, r.proto)
		}
	} else if len(r.status) > 0 {
		t.Errorf("no answer, want %v", r.status)
	}
	if r.closes && !c.closed() {
		t.Error("the gateway kept the connection open, want it closed")
	}
	if r.keeps && !c.serving() {
		t.Error("the gateway closed the connection, want it kept open")
	}
	// The upstream's side: what reached it during the row.
	seen := up.wait(r.upstream)
	if r.upstream >= 0 && seen.requests != r.upstream {
		t.Errorf("the upstream received %d requests, want %d; bytes:\n%s", seen.requests, r.upstream, trunc(seen.bytes))
	}
	for _, s := range r.upSees {
		if !strings.Contains(seen.bytes, s) {
			t.Errorf("the upstream's bytes lack %q:\n%s", s, trunc(seen.bytes))
		}
	}
	for _, s := range r.upNot {
		if strings.Contains(seen.bytes, s) {
			t.Errorf("the upstream's bytes hold %q:\n%s", s, trunc(seen.bytes))
		}
	}
}

// readAnswers reads the answers to one request: interim 1xx answers (other
// than 101) and then the final one. An error after some answers means the
// exchange ended there (a closed connection, or nothing more within 5 s).
func readAnswers(c net.Conn, br *bufio.Reader, method string) ([]doorAnswer, error) {
	var out []doorAnswer
	for {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return out, fmt.Errorf("reading an answer: %w", err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, doorAnswer{resp.StatusCode, resp.Proto, resp.Header, string(b)})
		if err != nil {
			return out, fmt.Errorf("reading an answer's body: %w", err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return out, nil
		}
	}
}

// closedByPeer reports whether the gateway has closed c: a read sees EOF
// (or a reset) within 2 s. Bytes that arrive instead count as open.
func closedByPeer(c net.Conn, br *bufio.Reader) bool {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := br.Peek(1)
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

func statuses(as []doorAnswer) []int {
	out := make([]int, 0, len(as))
	for _, a := range as {
		out = append(out, a.status)
	}
	return out
}

// requestMethod is the method of a raw request's request line.
func requestMethod(raw string) string {
	m, _, _ := strings.Cut(raw, " ")
	return m
}

// wireUpstream is an HTTP/1.1 upstream on a raw listener: it records the
// bytes it receives and counts the requests it parses, and answers each
// request as answer says (200 "upstream PATH" by default).
type wireUpstream struct {
	ln  net.Listener
	URL string
	// answer returns the raw response to write for a request, and whether
	// to close the connection after it. Nil: the default answer.
	answer func(req *http.Request, body []byte) (raw string, close bool)

	mu       sync.Mutex
	bytes    bytes.Buffer
	requests int
	wg       sync.WaitGroup
}

func newWireUpstream(t *testing.T, answer func(req *http.Request, body []byte) (string, bool)) *wireUpstream {
	t.Helper()
	ln := testkit.Listen(t)
	u := &wireUpstream{ln: ln, URL: "http://" + ln.Addr().String(), answer: answer}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				u.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		u.wg.Wait()
	})
	return u
}

// recorder copies what the upstream reads into its byte log.
type recorder struct {
	u *wireUpstream
	c net.Conn
}

func (r recorder) Read(p []byte) (int, error) {
	n, err := r.c.Read(p)
	r.u.mu.Lock()
	r.u.bytes.Write(p[:n])
	r.u.mu.Unlock()
	return n, err
}

func (u *wireUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(recorder{u, c})
	for {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		u.mu.Lock()
		u.requests++
		u.mu.Unlock()
		raw, closeAfter := "", false
		if u.answer != nil {
			raw, closeAfter = u.answer(req, body)
		}
		if raw == "" {
			text := "upstream " + req.URL.Path
			raw = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(text), text)
			if req.Method == http.MethodHead {
				raw = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", len(text))
			}
		}
		if _, err := io.WriteString(c, raw); err != nil || closeAfter || req.Close {
			return
		}
	}
}

// wireSeen is what the upstream received since the last reset.
type wireSeen struct {
	requests int
	bytes    string
}

func (u *wireUpstream) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.bytes.Reset()
	u.requests = 0
}

// wait returns what the upstream has received, after waiting (bounded) for
// want requests to arrive, and then a short while for any surplus.
func (u *wireUpstream) wait(want int) wireSeen {
	deadline := time.Now().Add(5 * time.Second)
	for {
		u.mu.Lock()
		s := wireSeen{u.requests, u.bytes.String()}
		u.mu.Unlock()
		if want < 0 || s.requests >= want || time.Now().After(deadline) {
			if want >= 0 && s.requests == want {
				time.Sleep(50 * time.Millisecond) // a surplus request would show here
				u.mu.Lock()
				s = wireSeen{u.requests, u.bytes.String()}
				u.mu.Unlock()
			}
			return s
		}
		time.Sleep(10 * time.Millisecond) // polling another process, bounded
	}
}

// doorConfig is the gateway config of the door rows: a limited exact path,
// GET-only limited routes and a catch-all behind them, and forward-auth
// routes in the shape of docs/forward-auth.md's recipes.
func doorConfig(up string) string {
	return header + `
policies:
  once: {algorithm: token_bucket, capacity: 1, rate: 0.0001}
  ten:  {algorithm: token_bucket, capacity: 10, rate: 0.0001}
routes:
  - id: login
    match: {path: /login}
    upstream: ` + up + `
    limits: [{policy: once, key: header:X-User-Id}]
  - id: reports
    match: {path: /reports/**, methods: [GET]}
    upstream: ` + up + `
    limits: [{policy: once, key: header:X-User-Id}]
  - id: fa-login
    match: {path: /_auth/original}
    forward_auth: {from: x-original, match: {path: /login, methods: [POST]}}
    limits: [{policy: once, key: header:X-User-Id}]
  - id: fa-reports
    match: {path: /_auth/original}
    forward_auth: {from: x-original, match: {path: /reports/**, methods: [GET]}}
    limits: [{policy: once, key: header:X-User-Id}]
  - id: fa-rest
    match: {path: /_auth/original}
    forward_auth: {from: x-original}
  - id: fwd-login
    match: {path: /_auth/forwarded}
    forward_auth: {from: x-forwarded, match: {path: /login, methods: [POST]}}
    limits: [{policy: once, key: header:X-User-Id}]
  - id: fwd-rest
    match: {path: /_auth/forwarded}
    forward_auth: {from: x-forwarded}
  - id: api
    match: {path: /api/**}
    upstream: ` + up + `
    limits: [{policy: ten, key: header:X-User-Id}]
  - id: catch-all
    match: {path: /**}
    upstream: ` + up + `
`
}

// TestDoorRowsHarness checks the runner itself on rows whose answers hold
// on every build: it must tell a served request from a refused one, and see
// what reached the upstream.
func TestDoorRowsHarness(t *testing.T) {
	t.Parallel()
	up := newWireUpstream(t, nil)
	runDoorRows(t, doorConfig(up.URL), up, 3, []doorRow{
		{
			name:     "a plain GET is forwarded and the connection kept",
			send:     []string{"GET /api/a HTTP/1.1\r\nHost: x\r\nX-User-Id: harness-1\r\n\r\n"},
			status:   []int{200},
			header:   map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "9"},
			body:     "upstream /api/a",
			proto:    "HTTP/1.1",
			keeps:    true,
			upstream: 1,
			upSees:   []string{"GET /api/a HTTP/1.1", "X-User-Id: harness-1"},
		},
		{
			name: "the second request on an exact path is refused and not forwarded",
			send: []string{
				"POST /login HTTP/1.1\r\nHost: x\r\nX-User-Id: harness-2\r\nContent-Length: 0\r\n\r\n",
				"POST /login HTTP/1.1\r\nHost: x\r\nX-User-Id: harness-2\r\nContent-Length: 0\r\n\r\n",
			},
			status:   []int{200, 429},
			header:   map[string]string{"Content-Type": "application/problem+json", "Retry-After": "~"},
			upstream: 1,
		},
		{
			name:     "an encoded slash is refused (404, the path rules) before any limit",
			send:     []string{"GET /api/a%2Fb HTTP/1.1\r\nHost: x\r\nX-User-Id: harness-3\r\n\r\n"},
			status:   []int{404},
			header:   map[string]string{"X-RateLimit-Remaining": absent},
			upstream: 0,
		},
	})
}
