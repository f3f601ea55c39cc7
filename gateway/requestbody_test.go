package gateway

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// levelRecorder is a slog.Handler that keeps each record's level and message.
type levelRecorder struct {
	mu   sync.Mutex
	recs []string // "LEVEL message"
}

func (l *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levelRecorder) WithGroup(string) slog.Handler            { return l }
func (l *levelRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Level.String()+" "+r.Message)
	return nil
}

// take returns the records so far and forgets them.
func (l *levelRecorder) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.recs
	l.recs = nil
	return recs
}

// bodyUpstream counts the requests whose body arrived whole and those whose
// body ended in an error (the gateway aborted it).
type bodyUpstream struct {
	*httptest.Server
	whole, aborted atomic.Int64
}

func newBodyUpstream(t *testing.T) *bodyUpstream {
	u := &bodyUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			u.aborted.Add(1)
			return
		}
		u.whole.Add(1)
		w.Write([]byte("ok"))
	}))
	t.Cleanup(u.Close)
	return u
}

// TestMalformedRequestBodyIs400: a request body that Go's server cannot
// read while the proxy streams it (bare LF or an overflowing or non-hex
// chunk size in chunked encoding) is the client's fault: 400 with the
// docs/semantics.md §5.3 body, logged at debug rather than as an upstream failure, and the
// upstream gets no whole request. A well-formed chunked body still passes.
func TestMalformedRequestBodyIs400(t *testing.T) {
	up := newBodyUpstream(t)
	logs := &levelRecorder{}
	g, err := New(testConfig(upstreamRoute("api", "/api", up.URL)), Deps{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := startServer(t, g)

	const head = "POST /api HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, tt := range []struct {
		name   string
		body   string
		status int
		whole  int64 // whole requests the upstream gets
	}{
		{"well-formed", "5\r\nhello\r\n0\r\n\r\n", 200, 1},
		{"bare LF", "5\nhello\n0\n\n", 400, 0},
		{"chunk size overflow", "ffffffffffffffffff1\r\nx\r\n0\r\n\r\n", 400, 0},
		{"chunk size not hex", "zz\r\nhello\r\n0\r\n\r\n", 400, 0},
		{"bare LF after a good chunk", "5\r\nhello\r\n3\nabc\n0\r\n\r\n", 400, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wholeBefore := up.whole.Load()
			resp := rawRequest(t, srv.Addr().String(), head+tt.body)
			defer resp.Body.Close()
			if tt.status == 200 {
				if resp.StatusCode != 200 {
					t.Fatalf("status = %d, want 200", resp.StatusCode)
				}
			} else {
				problemBody(t, resp, tt.status)
			}
			if got := up.whole.Load() - wholeBefore; got != tt.whole {
				t.Errorf("upstream got %d whole requests, want %d", got, tt.whole)
			}
			recs := logs.take()
			for _, r := range recs {
				if strings.HasPrefix(r, "WARN") || strings.HasPrefix(r, "ERROR") {
					t.Errorf("log record %q: a client's malformed body is not a warning", r)
				}
			}
			if tt.status == 400 && !slices.Contains(recs, "DEBUG request body unreadable") {
				t.Errorf("log records %q, want a debug record \"request body unreadable\"", recs)
			}
		})
	}
}

// TestRequestBodyErrorBlame: the 400 depends on the body actually failing
// while it was forwarded. A body cut short (read error io.ErrUnexpectedEOF)
// gets 400; the same body for an upstream that cannot be reached is never
// read, so the answer stays 502.
func TestRequestBodyErrorBlame(t *testing.T) {
	up := newBodyUpstream(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	g := newTestGateway(t, testConfig(upstreamRoute("api", "/api", up.URL), upstreamRoute("dead", "/dead", deadURL)))

	for _, tt := range []struct {
		path   string
		status int
	}{{"/api", 400}, {"/dead", 502}} {
		t.Run(tt.path, func(t *testing.T) {
			// Five bytes announced, three sent, then the connection broke.
			body := io.MultiReader(strings.NewReader("hel"), iotest.ErrReader(io.ErrUnexpectedEOF))
			req := httptest.NewRequest("POST", tt.path, body)
			req.ContentLength = 5
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, req)
			problemBody(t, rec.Result(), tt.status)
		})
	}
	if n := up.whole.Load(); n != 0 {
		t.Errorf("upstream got %d whole requests, want 0", n)
	}
}

// rawRequest writes payload on a fresh connection to addr and reads one
// response. The write side stays open (Go's server takes a half-closed
// client for gone).
func rawRequest(t *testing.T, addr, payload string) *http.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, payload); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	return resp
}

// TestStalledRequestBodyIs408: a client that sends part of its body and
// then nothing is answered 408 once the route's timeout passes, and the
// upstream request is released, instead of both waiting for as long as the
// client likes (the transport only returns once its write of the body
// ends). A slow upstream that has the whole body is still a 504, and the
// connection of a request answered in time serves the next request.
func TestStalledRequestBodyIs408(t *testing.T) {
	up := newBodyUpstream(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	api, slowRoute := upstreamRoute("api", "/api", up.URL), upstreamRoute("slow", "/slow", slow.URL)
	api.Timeout, slowRoute.Timeout = 300*time.Millisecond, 300*time.Millisecond
	g := newTestGateway(t, testConfig(api, slowRoute))
	// Bounded (startServer): a request stuck on its body would hold Shutdown forever.
	srv := startServer(t, g)

	start := time.Now()
	resp := rawRequest(t, srv.Addr().String(), "POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
	problemBody(t, resp, http.StatusRequestTimeout)
	resp.Body.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the 408 took %v, want about the route's 300ms timeout", took)
	}
	deadline := time.Now().Add(5 * time.Second)
	for up.aborted.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream request was not released: %d aborted, %d whole", up.aborted.Load(), up.whole.Load())
		}
		time.Sleep(10 * time.Millisecond) // waiting for the upstream handler to see the abort, bounded
	}

	// The whole body, then a slow upstream: 504, as before.
	resp = rawRequest(t, srv.Addr().String(), "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
	problemBody(t, resp, http.StatusGatewayTimeout)
	resp.Body.Close()

	// A request answered in time keeps its connection for the next one.
	c, err := net.DialTimeout("tcp", srv.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for i := range 2 {
		if _, err := io.WriteString(c, "POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d on one connection: %d, want 200", i+1, resp.StatusCode)
		}
		if i == 0 {
			time.Sleep(400 * time.Millisecond) // past the route's timeout: its timer must not touch the connection
		}
	}
}
