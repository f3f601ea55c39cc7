package httpengine_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/gatewaytest"
	"github.com/sluice-gw/sluice/internal/testcert"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// seen is what the test upstream received of one request.
type seen struct {
	method, uri, host string
	header            http.Header
	body              string
}

// recorder is a test upstream that records what it receives.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (u *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if upgradeEcho(w, r) {
		return
	}
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, seen{r.Method, r.RequestURI, r.Host, r.Header.Clone(), string(b)})
	u.mu.Unlock()
	switch strings.TrimPrefix(r.URL.Path, "/base") {
	case "/slow":
		time.Sleep(2 * time.Second)
	case "/stream":
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
		return
	}
	w.Header().Set("X-Upstream", "yes")
	if p := r.Header.Get("X-Upstream-Panic"); p != "" {
		w.Header().Set("X-Test-Panic", p) // the test hook panics reading the answer
	}
	w.Header().Set("X-RateLimit-Limit", "999") // replaced by the gateway's
	fmt.Fprintf(w, "upstream %s %s", r.Method, r.RequestURI)
}

func (u *recorder) last(t *testing.T) seen {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return u.reqs[len(u.reqs)-1]
}

// fixture is a gateway serving cleartext HTTP/1.1 (fasthttp), h2c and
// HTTPS (HTTP/1.1 and HTTP/2) with the same routes, and a client per
// protocol.
type fixture struct {
	srv     *gateway.Server
	pool    *x509.CertPool // trusts the HTTPS listener's certificate
	up      *recorder
	clients map[string]*http.Client
	bases   map[string]string
}

// The protocols of the public listeners.
var protocols = []string{"http/1.1", "h2c", "https/1.1", "h2"}

const routes = `
policies:
  small: {algorithm: token_bucket, capacity: 3, rate: 0.001}
routes:
  - id: hello
    match: {path: /hello}
    respond: {status: 200, body: "hello\n", headers: {X-Fixed: "1"}}
    limits: [{policy: small, key: "header:X-Client"}]
  - id: auth
    match: {path: /auth}
    forward_auth: {from: request}
    limits: [{policy: small, key: "header:X-Client"}]
  - id: api
    match: {path: /api/**}
    upstream: UPSTREAM/base
    strip_prefix: 1
    timeout: 500ms
    limits: [{policy: small, key: "header:X-Client"}]
`

func newFixture(t *testing.T, extra string) *fixture {
	t.Helper()
	ports := testkit.FreePorts(t, 2)
	dir := t.TempDir()
	certFile, keyFile, pool := testcert.SelfSigned(t, dir)
	up := &recorder{}
	upAddr := testkit.Serve(t, (&http.Server{Handler: up, ReadHeaderTimeout: 5 * time.Second}).Serve)
	yaml := fmt.Sprintf(`
server:
  listen: 127.0.0.1:%d
  tls:
    listen: 127.0.0.1:%d
    certificates: [{cert_file: %q, key_file: %q}]
%s
  http2: {h2c: true}
admin: {listen: 127.0.0.1:0}
store: {type: memory}
`, ports[0], ports[1], certFile, keyFile, extra) + strings.ReplaceAll(routes, "UPSTREAM", "http://"+upAddr)
	cfg, err := config.Parse(filepath.Join(dir, "sluice.yaml"), []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	g := gatewaytest.New(t, cfg, gateway.Deps{})
	f := clientsFor(t, gatewaytest.Start(t, g), pool)
	f.up = up
	return f
}

// clientsFor returns the fixture of srv, whose HTTPS certificate pool
// trusts, with a client per protocol.
func clientsFor(t *testing.T, srv *gateway.Server, pool *x509.CertPool) *fixture {
	t.Helper()
	f := &fixture{srv: srv, clients: map[string]*http.Client{}, bases: map[string]string{}, pool: pool}
	clear := "http://" + srv.Addr().String()
	secure := "https://" + srv.TLSAddr().String()
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	mk := func(tr *http.Transport) *http.Client {
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: noRedirect}
	}
	var h2c, h2 http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	h2.SetHTTP2(true)
	f.clients["http/1.1"], f.bases["http/1.1"] = mk(&http.Transport{}), clear
	f.clients["h2c"], f.bases["h2c"] = mk(&http.Transport{Protocols: &h2c}), clear
	f.clients["https/1.1"], f.bases["https/1.1"] = mk(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}), secure
	f.clients["h2"], f.bases["h2"] = mk(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: &h2}), secure
	return f
}

// answer is what a client read, reduced to what must be equal on every
// protocol.
type answer struct {
	proto  int
	status int
	header map[string]string
	body   string
}

// compared are the headers an answer must carry alike on every protocol.
var compared = []string{"Content-Type", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "Ratelimit", "Ratelimit-Policy",
	"Retry-After", "Location", "X-Fixed", "X-Upstream"}

func (f *fixture) do(t *testing.T, proto, method, path string, header map[string]string, body string) answer {
	t.Helper()
	var rb io.Reader
	if body != "" {
		rb = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.bases[proto]+path, rb)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := f.clients[proto].Do(req)
	if err != nil {
		t.Fatalf("%s %s %s: %v", proto, method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s %s: reading the body: %v", proto, method, path, err)
	}
	a := answer{proto: resp.ProtoMajor, status: resp.StatusCode, header: map[string]string{}, body: string(b)}
	for _, h := range compared {
		if v := resp.Header.Get(h); v != "" {
			a.header[h] = v
		}
	}
	return a
}

// wantMajor is the HTTP major version each protocol must answer in.
var wantMajor = map[string]int{"http/1.1": 1, "h2c": 2, "https/1.1": 1, "h2": 2}

// TestSameAnswersEveryProtocol: the same requests get the same answers —
// statuses, rate-limit headers, Retry-After, bodies, fixed answers,
// refusals, path rules, timeouts — over cleartext HTTP/1.1, h2c, HTTPS/1.1
// and HTTP/2, and the upstream sees the same request.
func TestSameAnswersEveryProtocol(t *testing.T) {
	f := newFixture(t, "")
	type step struct {
		method, path string
		body         string
	}
	steps := []step{
		{"GET", "/hello", ""},
		{"GET", "/hello", ""},
		{"HEAD", "/hello", ""},
		{"GET", "/hello", ""}, // the fourth for the key: 429
		{"GET", "/api/x?q=1", ""},
		{"POST", "/api/upload", "payload"},
		{"GET", "/api/slow", ""}, // the route's 500ms timeout: 504
		{"GET", "/api/more", ""}, // the fourth: 429
		{"GET", "/nowhere", ""},
		{"GET", "/api/a%2fb", ""},         // an encoded slash matches no route: 404
		{"GET", "/api/%2e%2e/secret", ""}, // an encoded dot segment: no route takes it
		{"GET", "/auth", ""},              // forward-auth's verdict, from the request itself
		{"GET", "/hello#frag", ""},        // a client drops the fragment: /hello, 429
	}
	got := map[string][]answer{}
	ups := map[string][]seen{}
	for _, proto := range protocols {
		client := map[string]string{"X-Client": proto}
		for _, s := range steps {
			n := len(f.up.reqs)
			a := f.do(t, proto, s.method, s.path, client, s.body)
			if a.proto != wantMajor[proto] {
				t.Errorf("%s: answered in HTTP/%d", proto, a.proto)
			}
			got[proto] = append(got[proto], a)
			f.up.mu.Lock()
			if len(f.up.reqs) > n {
				r := f.up.reqs[len(f.up.reqs)-1]
				ups[proto] = append(ups[proto], r)
			} else {
				ups[proto] = append(ups[proto], seen{})
			}
			f.up.mu.Unlock()
		}
	}
	base := got["http/1.1"]
	// The cleartext HTTP/1.1 answers are the reference: check they are
	// what the steps expect, so that agreeing with them means something.
	wantStatus := []int{200, 200, 200, 429, 200, 200, 504, 429, 404, 404, 404, 200, 429}
	for i, a := range base {
		if i < len(wantStatus) && a.status != wantStatus[i] {
			t.Errorf("http/1.1 %s %s: status %d, want %d (body %q)", steps[i].method, steps[i].path, a.status, wantStatus[i], a.body)
		}
	}
	for _, proto := range protocols[1:] {
		for i, a := range got[proto] {
			b := base[i]
			a.proto, b.proto = 0, 0
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("%s %s %s:\n got %v\nwant %v (http/1.1)", proto, steps[i].method, steps[i].path, a, b)
			}
			ua, ub := ups[proto][i], ups["http/1.1"][i]
			if ua.method != ub.method || ua.uri != ub.uri || ua.host != ub.host || ua.body != ub.body {
				t.Errorf("%s %s %s: the upstream saw %s %s (Host %s, body %q), over http/1.1 %s %s (Host %s, body %q)",
					proto, steps[i].method, steps[i].path, ua.method, ua.uri, ua.host, ua.body, ub.method, ub.uri, ub.host, ub.body)
			}
			if ua.header != nil {
				wantProto := "http"
				if strings.HasPrefix(proto, "http") && proto != "http/1.1" || proto == "h2" {
					wantProto = "https"
				}
				if proto == "h2c" {
					wantProto = "http"
				}
				if p := ua.header.Get("X-Forwarded-Proto"); p != wantProto {
					t.Errorf("%s: X-Forwarded-Proto %q, want %q", proto, p, wantProto)
				}
				if xff := ua.header.Get("X-Forwarded-For"); xff != "127.0.0.1" {
					t.Errorf("%s: X-Forwarded-For %q, want 127.0.0.1", proto, xff)
				}
				if v := ua.header.Get("X-Forwarded-Host"); v != ub.header.Get("X-Forwarded-Host") && !strings.HasPrefix(v, "127.0.0.1:") {
					t.Errorf("%s: X-Forwarded-Host %q", proto, v)
				}
			}
		}
	}
}

// TestPlaintextModes: under redirect, the cleartext listener (HTTP/1.1
// and h2c) answers 308 to the https URL, forward-auth routes excepted;
// under refuse, 403; the HTTPS listener serves either way.
func TestPlaintextModes(t *testing.T) {
	for _, mode := range []string{"redirect", "refuse"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, "    plaintext: "+mode)
			tlsPort := f.srv.TLSAddr().(*net.TCPAddr).Port
			for _, proto := range []string{"http/1.1", "h2c"} {
				a := f.do(t, proto, "GET", "/hello?x=1", map[string]string{"X-Client": "c"}, "")
				if mode == "redirect" {
					want := fmt.Sprintf("https://127.0.0.1:%d/hello?x=1", tlsPort)
					if a.status != http.StatusPermanentRedirect || a.header["Location"] != want {
						t.Errorf("%s: %d Location %q, want 308 %s", proto, a.status, a.header["Location"], want)
					}
				} else if a.status != http.StatusForbidden || !strings.Contains(a.body, "HTTPS only") {
					t.Errorf("%s: %d %q, want 403 naming HTTPS", proto, a.status, a.body)
				}
				if a.header["X-Ratelimit-Remaining"] != "" {
					t.Errorf("%s: the cleartext answer ran the limits (X-RateLimit-Remaining %s)", proto, a.header["X-Ratelimit-Remaining"])
				}
				if a := f.do(t, proto, "GET", "/auth", map[string]string{"X-Client": "fa-" + proto}, ""); a.status != http.StatusOK {
					t.Errorf("%s: forward-auth route answered %d under %s, want 200", proto, a.status, mode)
				}
			}
			for _, proto := range []string{"https/1.1", "h2"} {
				if a := f.do(t, proto, "GET", "/hello", map[string]string{"X-Client": proto}, ""); a.status != http.StatusOK {
					t.Errorf("%s: %d, want 200", proto, a.status)
				}
			}
		})
	}
}

// TestStreaming: an event stream of unknown length streams through on
// every protocol.
func TestStreaming(t *testing.T) {
	f := newFixture(t, "")
	for _, proto := range protocols {
		a := f.do(t, proto, "GET", "/api/stream", map[string]string{"X-Client": "s-" + proto}, "")
		if a.status != 200 || a.body != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
			t.Errorf("%s: %d %q", proto, a.status, a.body)
		}
	}
}

// TestConnectionNamesFraming: over HTTPS/1.1, a request whose Connection
// header names Content-Length or Transfer-Encoding is 400 in problem+json,
// its connection closed, and it is not forwarded, as on the cleartext
// listener.
func TestConnectionNamesFraming(t *testing.T) {
	f := newFixture(t, "")
	for _, raw := range []string{
		"POST /api/a HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Client: cf\r\nConnection: keep-alive, Content-Length\r\nContent-Length: 5\r\n\r\nhello",
		"POST /api/a HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Client: cf\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	} {
		c, err := tls.Dial("tcp", f.srv.TLSAddr().String(), &tls.Config{RootCAs: f.pool, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(string(body), "framing header") {
			t.Errorf("%q: %d %q %q, want 400 in problem+json naming the framing header", raw, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if resp.Header.Get("X-Ratelimit-Remaining") != "" {
			t.Errorf("%q: the 400 carries X-RateLimit-Remaining, want it refused before any limit", raw)
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		var ne net.Error
		if _, err := br.ReadByte(); err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%q: the connection goes on after the 400, want it closed", raw)
		}
	}
	f.up.mu.Lock()
	defer f.up.mu.Unlock()
	if len(f.up.reqs) != 0 {
		t.Errorf("the upstream received %d requests, want none", len(f.up.reqs))
	}
}
