package httpengine_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/internal/panichook"
)

// panicHeader names the point where the test hook panics.
const panicHeader = "X-Test-Panic"

func init() {
	panichook.Hook = func(point string, h panichook.Peeker) {
		if string(h.Peek(panicHeader)) == point {
			panic("test panic at " + point)
		}
	}
}

// TestPanicsAnswered: a panic while a request is decided or forwarded is
// answered 500 in problem+json over HTTPS/1.1, HTTP/2 and h2c, the route's
// concurrency-free limits keep their count, and the connection or server
// keeps serving the next request; a panic while the upstream's answer is
// read ends that answer alone.
func TestPanicsAnswered(t *testing.T) {
	f := newFixture(t, "")
	for _, proto := range []string{"h2c", "https/1.1", "h2"} {
		for _, point := range []string{"decide", "forward", "body"} {
			h := map[string]string{"X-Client": "p-" + proto + point, panicHeader: point}
			if point == "body" {
				h = map[string]string{"X-Client": "p-" + proto + point, "X-Upstream-Panic": point}
			}
			a := f.do(t, proto, "GET", "/api/p", h, "")
			if a.status != http.StatusInternalServerError || a.header["Content-Type"] != "application/problem+json" {
				t.Errorf("%s panic at %s: %d %q, want a problem+json 500", proto, point, a.status, a.header["Content-Type"])
			}
		}
		if a := f.do(t, proto, "GET", "/api/after", map[string]string{"X-Client": "after-" + proto}, ""); a.status != http.StatusOK {
			t.Errorf("%s: after the panics: %d, want 200", proto, a.status)
		}
	}
}

// TestUpgradeOverHTTPS: an HTTP/1.1 GET with Upgrade over TLS is tunnelled
// to the upstream when it answers 101, both ways.
func TestUpgradeOverHTTPS(t *testing.T) {
	f := newFixture(t, "")
	conn, err := tls.Dial("tcp", f.srv.TLSAddr().String(), &tls.Config{RootCAs: f.pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /api/echo HTTP/1.1\r\nHost: gw\r\nX-Client: ws\r\nConnection: Upgrade\r\nUpgrade: test-echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "test-echo" {
		t.Fatalf("%d Upgrade %q, want 101 test-echo", resp.StatusCode, resp.Header.Get("Upgrade"))
	}
	if resp.Header.Get("X-Ratelimit-Remaining") == "" {
		t.Error("the 101 lacks the decision's rate-limit headers")
	}
	io.WriteString(conn, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo: ping\n" {
		t.Fatalf("through the tunnel: %q %v", line, err)
	}
}

// upgradeEcho answers an Upgrade request 101 and echoes lines back.
func upgradeEcho(w http.ResponseWriter, r *http.Request) bool {
	if !strings.EqualFold(r.Header.Get("Connection"), "upgrade") {
		return false
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return true
	}
	defer c.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
	brw.Flush()
	for {
		line, err := brw.ReadString('\n')
		if err != nil {
			return true
		}
		brw.WriteString("echo: " + line)
		brw.Flush()
	}
}
