package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
)

// connRequest is a GET with a header block just under the default
// server.max_header_bytes (16 KiB).
var connRequest = "GET /hello HTTP/1.1\r\nHost: sluice\r\nX-Pad: " + strings.Repeat("p", 16000) + "\r\n\r\n"

// openConn dials addr from the loopback address local ("" for any), sends
// connRequest and returns the connection and its response, body read.
func openConn(t *testing.T, addr, local string) (net.Conn, *http.Response, string) {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, connRequest); err != nil {
		t.Fatalf("write: %v", err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read the body: %v", err)
	}
	res.Body.Close()
	return c, res, string(body)
}

// checkRefused checks a refusal: status, problem+json, Retry-After: 1,
// and the connection closed after it.
func checkRefused(t *testing.T, c net.Conn, res *http.Response, body string, status int, bound string) {
	t.Helper()
	if res.StatusCode != status || res.Header.Get("Retry-After") != "1" ||
		res.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, bound) {
		t.Errorf("past %s: %d Retry-After %q Content-Type %q %s, want %d problem+json naming the bound with Retry-After 1",
			bound, res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("Content-Type"), body, status)
	}
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("past %s: the connection stays open (read %d bytes), want it closed", bound, n)
	}
}

// TestMaxConnsRefusesTheExcess: server.max_conns
// bounds the public listener's open connections, idle keep-alive ones
// included; a connection past it is answered 503 in problem+json and
// closed, and closing a held connection makes room again.
func TestMaxConnsRefusesTheExcess(t *testing.T) {
	const bound = 8
	cfg := testConfig(config.Route{ID: "hello", Match: config.Match{Path: "/hello"}, Respond: &config.Respond{Status: 200, Body: "hi\n"}})
	cfg.Server.MaxConns = bound
	g := newTestGateway(t, cfg)
	srv, _, _ := startServerURLs(t, g)
	addr := srv.Addr().String()
	held := make([]net.Conn, bound)
	for i := range held {
		c, res, _ := openConn(t, addr, "")
		if res.StatusCode != 200 {
			t.Fatalf("connection %d of %d = %d, want 200", i+1, bound, res.StatusCode)
		}
		held[i] = c // kept alive, idle
	}
	for range 3 {
		c, res, body := openConn(t, addr, "")
		checkRefused(t, c, res, body, http.StatusServiceUnavailable, "server.max_conns")
	}
	checkRefusedCount(t, g, 3, 0)
	held[0].Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, res, _ := openConn(t, addr, "")
		if res.StatusCode == 200 {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("after a held connection closed, a new one still gets %d, want 200", res.StatusCode)
		}
		time.Sleep(50 * time.Millisecond) // polling for the closed connection's room, bounded by deadline
	}
}

// TestMaxConnsPerIP: server.max_conns_per_ip bounds the connections from
// one client address (429 past it); another address is not affected.
func TestMaxConnsPerIP(t *testing.T) {
	cfg := testConfig(config.Route{ID: "hello", Match: config.Match{Path: "/hello"}, Respond: &config.Respond{Status: 200, Body: "hi\n"}})
	cfg.Server.MaxConnsPerIP = 2
	g := newTestGateway(t, cfg)
	srv, _, _ := startServerURLs(t, g)
	addr := srv.Addr().String()
	for i := range 2 {
		if _, res, _ := openConn(t, addr, "127.0.0.1"); res.StatusCode != 200 {
			t.Fatalf("connection %d from 127.0.0.1 = %d, want 200", i+1, res.StatusCode)
		}
	}
	c, res, body := openConn(t, addr, "127.0.0.1")
	checkRefused(t, c, res, body, http.StatusTooManyRequests, "server.max_conns_per_ip")
	if _, res, _ := openConn(t, addr, "127.0.0.2"); res.StatusCode != 200 {
		t.Errorf("a connection from 127.0.0.2 = %d, want 200", res.StatusCode)
	}
	checkRefusedCount(t, g, 0, 1)
}

// checkRefusedCount checks sluice_connections_refused_total by bound; both
// series are there from the start.
func checkRefusedCount(t *testing.T, g *Gateway, maxConns, perIP int) {
	t.Helper()
	m := scrapeMetrics(t, g)
	for bound, want := range map[string]int{"max_conns": maxConns, "max_conns_per_ip": perIP} {
		line := fmt.Sprintf("sluice_connections_refused_total{bound=%q} %d\n", bound, want)
		if !strings.Contains(m, line) {
			t.Errorf("want %q in the metrics:\n%s", strings.TrimSpace(line), grepMetric(m, "sluice_connections_refused_total"))
		}
	}
}

// grepMetric returns the lines of m that hold name.
func grepMetric(m, name string) string {
	var out []string
	for l := range strings.Lines(m) {
		if strings.Contains(l, name) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "\n")
}
