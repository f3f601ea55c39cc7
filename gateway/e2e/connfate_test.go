package e2e

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testkit"
)

// rawUpstream serves each connection's requests by path with a fixed raw
// answer: /close answers with Connection: close and hop-by-hop headers,
// then closes; /broken sends an interim 103 and half a header block and
// closes; /malformed a header block with a line that is no field; anything else
// is a plain keep-alive 200.
func rawUpstream(t *testing.T) string {
	t.Helper()
	return testkit.ServeConns(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body) //nolint:errcheck // bodyless requests
			switch req.URL.Path {
			case "/close":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close, X-Hop\r\nX-Hop: upstream\r\nKeep-Alive: timeout=5\r\nX-Kept: yes\r\n\r\nok") //nolint:errcheck // the client reads what arrives
				return
			case "/broken":
				io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nX-Leak: upstream\r\n\r\nHTTP/1.1 200 OK\r\nX-Leak: upstream\r\n") //nolint:errcheck // as above
				return
			case "/malformed":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Leak: upstream\r\nno field here\r\nContent-Length: 2\r\n\r\nok") //nolint:errcheck // as above
				return
			default:
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") //nolint:errcheck // as above
			}
		}
	})
}

// TestConnectionFate: the proxy rewrites the client's request in place and
// reads the upstream's answer into the client's, and neither side's
// connection handling leaks to the other. A client's Connection: close (or
// an HTTP/1.0 request without keep-alive) still closes its connection after
// the answer; an upstream's Connection: close, and the headers its
// Connection names, reach neither the client nor its connection; an
// upstream that breaks off or garbles its header block is answered 502 with
// nothing of what it sent.
func TestConnectionFate(t *testing.T) {
	t.Parallel()
	up := rawUpstream(t)
	p := start(t, `server: {listen: "127.0.0.1:0", shutdown_timeout: 10s}
admin: {listen: "127.0.0.1:0"}
store: {type: memory}
routes:
  - id: raw
    match: {path: /**}
    upstream: http://`+up+`
`)
	addr := strings.TrimPrefix(p.base, "http://")
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a failed deadline fails the reads below
		return c, bufio.NewReader(c)
	}
	send := func(c net.Conn, br *bufio.Reader, raw string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // small
		resp.Body.Close()
		return resp
	}
	closed := func(br *bufio.Reader) bool {
		_, err := br.ReadByte()
		return errors.Is(err, io.EOF)
	}

	t.Run("client asks to close", func(t *testing.T) {
		c, br := dial()
		resp := send(c, br, "GET /a HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 200 || !resp.Close {
			t.Errorf("status %d, Connection: close %v; want 200 and the connection announced closed", resp.StatusCode, resp.Close)
		}
		if !closed(br) {
			t.Error("the gateway kept a connection its client asked to close")
		}
	})
	t.Run("HTTP/1.0 without keep-alive", func(t *testing.T) {
		c, br := dial()
		if resp := send(c, br, "GET /a HTTP/1.0\r\nHost: gw\r\n\r\n"); resp.StatusCode != 200 {
			t.Errorf("status %d, want 200", resp.StatusCode)
		}
		if !closed(br) {
			t.Error("the gateway kept an HTTP/1.0 connection without keep-alive")
		}
	})
	t.Run("upstream closes", func(t *testing.T) {
		c, br := dial()
		resp := send(c, br, "GET /close HTTP/1.1\r\nHost: gw\r\n\r\n")
		if resp.StatusCode != 200 || resp.Close {
			t.Errorf("status %d, Connection: close %v; want 200 on a connection kept open", resp.StatusCode, resp.Close)
		}
		for _, h := range []string{"X-Hop", "Keep-Alive"} {
			if v := resp.Header.Get(h); v != "" {
				t.Errorf("%s: %q reached the client; hop-by-hop headers must not", h, v)
			}
		}
		if resp.Header.Get("X-Kept") != "yes" {
			t.Errorf("X-Kept %q, want the upstream's end-to-end header passed on", resp.Header.Get("X-Kept"))
		}
		// The same client connection serves the next request.
		if resp := send(c, br, "GET /a HTTP/1.1\r\nHost: gw\r\n\r\n"); resp.StatusCode != 200 {
			t.Errorf("second request on the connection: status %d, want 200", resp.StatusCode)
		}
	})
	for _, path := range []string{"/broken", "/malformed"} {
		t.Run("upstream breaks off its headers "+path, func(t *testing.T) {
			c, br := dial()
			resp := send(c, br, "GET "+path+" HTTP/1.1\r\nHost: gw\r\n\r\n")
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d, want 502", resp.StatusCode)
			}
			if v := resp.Header.Get("X-Leak"); v != "" {
				t.Errorf("X-Leak: %q reached the client from a broken upstream answer", v)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q, want application/problem+json", ct)
			}
			if resp := send(c, br, "GET /a HTTP/1.1\r\nHost: gw\r\n\r\n"); resp.StatusCode != 200 {
				t.Errorf("request after the 502 on the connection: status %d, want 200", resp.StatusCode)
			}
		})
	}
}
