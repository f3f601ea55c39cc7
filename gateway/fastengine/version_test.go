package fastengine

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// readHead parses a raw request head as the public listener's engine does.
func readHead(t *testing.T, raw string) *fasthttp.RequestHeader {
	t.Helper()
	var h fasthttp.RequestHeader
	if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatalf("reading %q: %v", raw, err)
	}
	return &h
}

// TestHeadChecks covers the head checks on
// the parsed header: the version read (minorAsHTTP11, majorOne), the
// leniencies checkFraming refuses, and which requests upgradeOf tunnels.
func TestHeadChecks(t *testing.T) {
	versions := []struct {
		raw       string
		proto     string
		majorOne  bool
		keepAlive bool
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1", true, true},
		{"GET / HTTP/1.0\r\nHost: x\r\n\r\n", "HTTP/1.0", true, false},
		{"GET / HTTP/1.2\r\nHost: x\r\n\r\n", "HTTP/1.1", true, true},
		{"GET / HTTP/1.9\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1", true, false},
		{"GET / HTTP/2.0\r\nHost: x\r\n\r\n", "HTTP/2.0", false, false},
		{"GET / HTTP/0.9\r\nHost: x\r\n\r\n", "HTTP/0.9", false, false},
	}
	for _, v := range versions {
		h := readHead(t, v.raw)
		minorAsHTTP11(h)
		if got := string(h.Protocol()); got != v.proto || majorOne(h.Protocol()) != v.majorOne || h.ConnectionClose() == v.keepAlive {
			t.Errorf("%q: protocol %s, major one %v, close %v; want %s, %v, %v", v.raw, got, majorOne(h.Protocol()), h.ConnectionClose(), v.proto, v.majorOne, !v.keepAlive)
		}
	}

	framing := []struct {
		raw    string
		status int
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\nX-User-Id: 1\r\nConnection: keep-alive\r\n\r\n", 0},
		{"GET / HTTP/1.1\r\nHost: x\r\nX User Id: 1\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: x\nX-User-Id: 1\r\n\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\nContent-Length: 1\r\n\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive ,TRANSFER-ENCODING\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: x\r\nConnection: X-Content-Length\r\nContent-Length: 1\r\n\r\n", 0},
	}
	for _, f := range framing {
		if got, detail := checkFraming(readHead(t, f.raw)); got != f.status {
			t.Errorf("checkFraming(%q) = %d %q, want %d", f.raw, got, detail, f.status)
		}
	}

	upgrades := []struct {
		raw  string
		want string
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "websocket"},
		{"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, upgrade\r\nUpgrade: websocket\r\n\r\n", "websocket"},
		{"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n", ""},
		{"GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: H2C\r\n\r\n", ""},
		{"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", ""},
		{"POST / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n", ""},
		{"GET / HTTP/1.0\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", ""},
	}
	for _, u := range upgrades {
		if got := upgradeOf(readHead(t, u.raw)); got != u.want {
			t.Errorf("upgradeOf(%q) = %q, want %q", u.raw, got, u.want)
		}
	}
}
