package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/panichook"
)

// panicHeader names the point of a request where panichook.Hook panics: a
// request header for "decide" and the tunnel's copiers, the upstream's
// response header for "body".
const panicHeader = "X-Test-Panic"

// The test build's panichook.Hook panics at the point a request's (or an
// upstream response's) X-Test-Panic header names; each point from a line
// of its own, so that each is a site of its own.
func init() {
	panichook.Hook = func(point string, h panichook.Peeker) {
		if string(h.Peek(panicHeader)) != point {
			return
		}
		switch point {
		case "decide":
			panic("test panic before the answer")
		case "forward":
			panic("test panic in the final handler")
		case "body":
			panic("test panic while the answer streams")
		case "tunnel to client":
			// After the client's first bytes have crossed to the upstream,
			// so that the other copier is blocked reading the client.
			time.Sleep(300 * time.Millisecond)
			panic("test panic in the tunnel's copier to the client")
		default:
			panic("test panic at " + point)
		}
	}
}

// panicGateway serves cfg on a started Server, logging at debug as JSON
// into the returned buffer.
func panicGateway(t *testing.T, cfg *config.Config) (*Gateway, *Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	g, err := New(cfg, Deps{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g, startServer(t, g), logs
}

// panicLogs returns the panic records in logs: how many carry a stack, and
// how many do not.
func panicLogs(t *testing.T, logs *syncBuffer) (withStack, without int) {
	t.Helper()
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if _, ok := rec["site"]; !ok {
			continue
		}
		if s, _ := rec["stack"].(string); strings.Contains(s, "panic") {
			withStack++
		} else {
			without++
		}
	}
	return withStack, without
}

// panicCount returns sluice_panics_total{door} as g's /metrics shows it.
func panicCount(t *testing.T, g *Gateway, door string) string {
	t.Helper()
	prefix := fmt.Sprintf("sluice_panics_total{door=%q} ", door)
	for line := range strings.Lines(scrapeMetrics(t, g)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return v
		}
	}
	return "absent"
}

// getWith sends GET path to front as user alice with header pairs.
func getWith(t *testing.T, front, path string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", front+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User", "alice")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// admitted waits until alice's next request is admitted (200): the lease
// of a request that panicked is released, promptly.
func admitted(t *testing.T, front, what string) {
	t.Helper()
	waitFor(t, 10*time.Second, what+": the next request of the key is not admitted (its lease held?)", func() bool {
		return getWith(t, front, "/slow").StatusCode == http.StatusOK
	})
}

// TestPanicBeforeAnswer: a panic in the public
// listener's handler, with the request's concurrency lease held, is answered
// 500 in problem+json with the connection closed, counted each time in
// sluice_panics_total{door="gateway"}, and logged with its stack once for
// its site; the lease is released, so the next request of the same key (on
// a limit of one in flight) is admitted.
func TestPanicBeforeAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	g, srv, logs := panicGateway(t, leaseConfig(up.URL, 1, time.Hour))
	front := "http://" + srv.Addr().String()
	for i := range 2 {
		resp := getWith(t, front, "/slow", panicHeader, "decide")
		problemBody(t, resp, http.StatusInternalServerError)
		if !resp.Close {
			t.Errorf("panic %d: the 500 keeps the connection open, want Connection: close", i+1)
		}
		admitted(t, front, fmt.Sprintf("after panic %d", i+1))
	}
	if got := panicCount(t, g, "gateway"); got != "2" {
		t.Errorf(`sluice_panics_total{door="gateway"} = %s, want 2`, got)
	}
	if got := panicCount(t, g, "forward_auth"); got != "0" {
		t.Errorf(`sluice_panics_total{door="forward_auth"} = %s, want 0`, got)
	}
	if with, without := panicLogs(t, logs); with != 1 || without != 1 {
		t.Errorf("panic logs: %d with a stack, %d without; want 1 and 1 (one site)\n%s", with, without, logs)
	}
	if m := scrapeMetrics(t, g); !strings.Contains(m, `sluice_requests_total{code="500",route=""} 2`) {
		t.Errorf("want the two 500s in sluice_requests_total, metrics:\n%s", m)
	}
}

// TestPanicForwardAuth: a panic while a forward_auth
// route decides is answered 500 and counted as forward_auth's.
func TestPanicForwardAuth(t *testing.T) {
	g, srv, _ := panicGateway(t, testConfig(forwardRoute("auth", "/auth", config.FromXForwarded)))
	front := "http://" + srv.Addr().String()
	resp := getWith(t, front, "/auth", panicHeader, "decide", "X-User-Id", "u1",
		"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/x", "X-Forwarded-Host", "app.test")
	problemBody(t, resp, http.StatusInternalServerError)
	if got := panicCount(t, g, "forward_auth"); got != "1" {
		t.Errorf(`sluice_panics_total{door="forward_auth"} = %s, want 1`, got)
	}
	if got := panicCount(t, g, "gateway"); got != "0" {
		t.Errorf(`sluice_panics_total{door="gateway"} = %s, want 0`, got)
	}
}

// TestPanicWhileStreaming: a panic while the upstream's
// body streams to the client, past the handler, closes the client's
// connection (the answer already started), is counted and logged with its
// stack, a site apart from a panic before the answer, and the request's
// lease is released.
func TestPanicWhileStreaming(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.Header.Get(panicHeader); p != "" {
			w.Header().Set(panicHeader, p)
		}
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush() // chunked: the gateway streams the body
		io.WriteString(w, "second\n")
	}))
	defer up.Close()
	g, srv, logs := panicGateway(t, leaseConfig(up.URL, 1, time.Hour))
	front := "http://" + srv.Addr().String()
	getWith(t, front, "/slow", panicHeader, "decide") // one site
	for i := range 2 {
		// The lease of the request admitted() last saw is released once its
		// answer has been written, which may be just after the client read
		// it: a 429 here is that lease, not the property under test.
		var resp *http.Response
		waitFor(t, 10*time.Second, "the key's lease was never free", func() bool {
			resp = getWith(t, front, "/slow", panicHeader, "body")
			return resp.StatusCode != http.StatusTooManyRequests
		})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("panic %d while streaming: status %d, want the upstream's 200", i+1, resp.StatusCode)
		}
		if b, err := io.ReadAll(resp.Body); err == nil {
			t.Fatalf("panic %d while streaming: the body (%q) ended cleanly, want the connection cut", i+1, b)
		}
		admitted(t, front, fmt.Sprintf("after panic %d", i+1))
	}
	waitFor(t, 10*time.Second, "the panics were not all counted", func() bool { return panicCount(t, g, "gateway") == "3" })
	if with, without := panicLogs(t, logs); with != 2 || without != 1 {
		t.Errorf("panic logs: %d with a stack, %d without; want 2 and 1 (two sites)\n%s", with, without, logs)
	}
}

// TestPanicInTunnel: a panic in a copier of an upgraded
// connection, a goroutine of the request's, closes the tunnel (both
// connections), is counted, and releases the request's lease.
func TestPanicInTunnel(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			io.WriteString(w, "ok")
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(c, brw) //nolint:errcheck // echo until either side closes
	}))
	defer up.Close()
	g, srv, _ := panicGateway(t, leaseConfig(up.URL, 1, time.Hour))
	for _, point := range []string{"tunnel to upstream", "tunnel to client"} {
		c, err := net.DialTimeout("tcp", srv.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: gw\r\nX-User: alice\r\nConnection: Upgrade\r\nUpgrade: echo\r\n%s: %s\r\n\r\n", panicHeader, point)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("%s: answer %v (%v), want the upstream's 101", point, resp, err)
		}
		io.WriteString(c, "ping\n")
		b, err := io.ReadAll(br)
		if ne, ok := err.(net.Error); ok && ne.Timeout() || len(b) > 0 {
			t.Errorf("%s: the tunnel gave %q, %v; want it closed without an echo", point, b, err)
		}
		admitted(t, "http://"+srv.Addr().String(), "after a panic in the "+point+" copier")
	}
	if got := panicCount(t, g, "gateway"); got != "2" {
		t.Errorf(`sluice_panics_total{door="gateway"} = %s, want 2`, got)
	}
}

// TestPanicSitesSurviveReload: the stack of a panic is
// logged once per site per process: a gateway built on reload (with
// Deps.Previous) logs a site its predecessor logged without the stack.
func TestPanicSitesSurviveReload(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := leaseConfig(up.URL, 1, time.Hour)
	var prev *Gateway
	for i := range 2 {
		deps := Deps{Logger: log, Previous: prev}
		if prev != nil {
			deps.Registry = prev.Registry()
		}
		g, err := New(cfg, deps)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { g.Close() })
		serveTestEngine(t, g)
		front := httptest.NewServer(g)
		defer front.Close()
		problemBody(t, getWith(t, front.URL, "/slow", panicHeader, "decide"), http.StatusInternalServerError)
		if got := panicCount(t, g, "gateway"); got != fmt.Sprint(i+1) {
			t.Errorf("gateway %d: sluice_panics_total{door=\"gateway\"} = %s, want %d", i+1, got, i+1)
		}
		prev = g
	}
	if with, without := panicLogs(t, logs); with != 1 || without != 1 {
		t.Errorf("panic logs: %d with a stack, %d without; want 1 and 1 (one site, one process)\n%s", with, without, logs)
	}
}

// TestPanicWithExpect: a request with Expect: 100-continue is decided before
// its 100 Continue and resumed after it, outside the handler's first call;
// a panic at either point is answered 500 and counted like any other, and
// the lease the request held is released.
func TestPanicWithExpect(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	g, srv, _ := panicGateway(t, leaseConfig(up.URL, 1, time.Hour))
	front := "http://" + srv.Addr().String()
	for i, point := range []string{"decide", "resume"} {
		c, err := net.DialTimeout("tcp", srv.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "POST /slow HTTP/1.1\r\nHost: x\r\nX-User: alice\r\n%s: %s\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", panicHeader, point)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
		if err != nil {
			t.Fatalf("%s: %v", point, err)
		}
		if resp.StatusCode == http.StatusContinue {
			io.WriteString(c, "hi")
			if resp, err = http.ReadResponse(br, &http.Request{Method: "POST"}); err != nil {
				t.Fatalf("%s: after 100 Continue: %v", point, err)
			}
		} else if point == "resume" {
			t.Fatalf("%s: %d before the body, want 100 Continue", point, resp.StatusCode)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("%s: %d, want 500", point, resp.StatusCode)
		}
		if got, want := panicCount(t, g, "gateway"), fmt.Sprint(i+1); got != want {
			t.Errorf(`%s: sluice_panics_total{door="gateway"} = %s, want %s`, point, got, want)
		}
		admitted(t, front, point)
	}
}
