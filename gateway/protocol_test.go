package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
)

// TestExpectContinueAndHTTP10: a client that sends Expect: 100-continue
// gets the interim 100 before it sends its body, and the body reaches the
// upstream; an HTTP/1.0 request without Host is served, its answer framed
// for HTTP/1.0 (no chunked coding) even when the upstream's has no length.
func TestExpectContinueAndHTTP10(t *testing.T) {
	up, last := recordingUpstream(t)
	stream := upstreamRoute("stream", "/stream", "")
	streamUp := newChunkedUpstream(t)
	stream.Upstream = streamUp
	g := newTestGateway(t, testConfig(upstreamRoute("api", "/api", up.URL), stream))
	srv := startServer(t, g)
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.DialTimeout("tcp", srv.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}

	c, br := dial()
	defer c.Close()
	io.WriteString(c, "POST /api HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("first line %q, %v; want the interim 100 Continue", line, err)
	}
	if blank, _ := br.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("after the 100: %q", blank)
	}
	io.WriteString(c, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || last.Load() == nil || last.Load().Body != "hello" {
		t.Errorf("answer %d, upstream saw %+v; want 200 and the body", resp.StatusCode, last.Load())
	}

	for _, path := range []string{"/api", "/stream"} {
		c, br := dial()
		io.WriteString(c, "GET "+path+" HTTP/1.0\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("HTTP/1.0 GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != 200 || resp.ProtoMinor != 0 && len(resp.TransferEncoding) > 0 || len(body) == 0 {
			t.Errorf("HTTP/1.0 GET %s: %d %s, transfer encoding %q, body %q", path, resp.StatusCode, resp.Proto, resp.TransferEncoding, body)
		}
		if len(resp.TransferEncoding) > 0 {
			t.Errorf("HTTP/1.0 GET %s: answered with Transfer-Encoding %q", path, resp.TransferEncoding)
		}
	}
}

// newChunkedUpstream returns the URL of an upstream whose answer has no
// Content-Length (sent chunked).
func newChunkedUpstream(t *testing.T) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("part one, "))
		w.(http.Flusher).Flush()
		w.Write([]byte("part two"))
	}))
	t.Cleanup(up.Close)
	return up.URL
}

// TestHeaderNamesAnyCase: header names are case-insensitive, so a key
// header and a matched header are found however the client spells them.
func TestHeaderNamesAnyCase(t *testing.T) {
	rc := config.Route{ID: "hello", Match: config.Match{Path: "/hello", Headers: map[string]string{"X-Tenant": "a"}},
		Respond: &config.Respond{Status: 200, Body: "hi"},
		Limits:  []config.Limit{{Policy: "three", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User-Id"}}}}}
	g := newTestGateway(t, testConfig(rc))
	for i, spelling := range []string{"x-user-id", "X-USER-ID", "X-User-Id"} {
		r := httptest.NewRequest("GET", "/hello", nil)
		r.Header[spelling] = []string{"alice"}
		r.Header["x-tenant"] = []string{"a"}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != strconv.Itoa(2-i) {
			t.Errorf("%s: %d, remaining %q; want 200 and %d (one budget, alice's)", spelling, w.Code, w.Header().Get("X-RateLimit-Remaining"), 2-i)
		}
	}
}

// TestBodyAfterUpstreamIdleClose: an upstream that closes idle keep-alive
// connections quickly does not turn a request with a body (which cannot be
// sent twice) into a 502 on a pooled connection it has closed.
func TestBodyAfterUpstreamIdleClose(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	up.Config.IdleTimeout = 50 * time.Millisecond
	up.Start()
	defer up.Close()
	g := newTestGateway(t, testConfig(upstreamRoute("api", "/api", up.URL)))
	for i := range 3 {
		r := httptest.NewRequest("POST", "/api", strings.NewReader("body"))
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != 200 || w.Body.String() != "body" {
			t.Fatalf("POST %d: %d %q, want 200 and the body echoed", i+1, w.Code, w.Body.String())
		}
		time.Sleep(200 * time.Millisecond) // past the upstream's idle timeout
	}
}
