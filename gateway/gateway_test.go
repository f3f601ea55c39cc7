package gateway

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/ratelimit"
)

// testConfig returns a valid config with the given routes and a few policies,
// defaults filled in by hand.
func testConfig(routes ...config.Route) *config.Config {
	return &config.Config{
		Server: config.Server{Listen: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second, ReadHeaderTimeout: 5 * time.Second,
			IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10},
		Admin: config.Admin{Listen: "127.0.0.1:0"},
		Store: config.Store{Type: config.StoreMemory, Prefix: "sluice", Timeout: 50 * time.Millisecond, OnError: config.OnErrorLocal},
		Policies: map[string]config.PolicySpec{
			"three": {Algorithm: ratelimit.FixedWindow, Limit: 3, Window: time.Hour},
		},
		Routes: routes,
	}
}

func upstreamRoute(id, path, upstream string) config.Route {
	return config.Route{ID: id, Match: config.Match{Path: path}, Upstream: upstream, Timeout: 5 * time.Second}
}

// problemBody decodes a docs/semantics.md §5.3 error body and checks its common shape.
func problemBody(t *testing.T, resp *http.Response, status int) map[string]any {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d", resp.StatusCode, status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("decoding the problem body: %v", err)
	}
	text := http.StatusText(status)
	if body["title"] != text || body["error"] != text || body["status"] != float64(status) || body["type"] != "about:blank" {
		t.Errorf("body = %v, want title = error = %q, status %d, type about:blank", body, text, status)
	}
	if body["detail"] != body["message"] || body["detail"] == "" {
		t.Errorf("body detail %q and message %q must be equal and non-empty", body["detail"], body["message"])
	}
	return body
}

// seen is what an upstream received.
type seen struct {
	Method, Path, RawQuery, Host, Body string
	Header                             http.Header
}

func recordingUpstream(t *testing.T) (*httptest.Server, *atomic.Pointer[seen]) {
	var last atomic.Pointer[seen]
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		last.Store(&seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Host, string(b), r.Header.Clone()})
		w.Header().Set("X-Upstream", "yes")
		w.Write([]byte("from upstream"))
	}))
	t.Cleanup(up.Close)
	return up, &last
}

func TestProxyRewrite(t *testing.T) {
	up, last := recordingUpstream(t)
	upURL, _ := url.Parse(up.URL)
	base := upstreamRoute("base", "/svc/**", up.URL+"/base")
	base.StripPrefix = 1
	base.Match.AllowEncodedSlash = true
	host := upstreamRoute("host", "/keep/**", up.URL)
	host.PreserveHost = true
	all := upstreamRoute("all", "/gone/**", up.URL+"/root")
	all.StripPrefix = 5
	g := newTestGateway(t, testConfig(base, host, all))
	front := httptest.NewServer(g)
	defer front.Close()

	tests := []struct {
		name, path, wantPath, wantHost string
	}{
		{"base path and strip_prefix", "/svc/v1/items?q=1&q=2", "/base/v1/items", upURL.Host},
		{"preserve_host", "/keep/x", "/keep/x", "client.example"},
		{"strip every segment", "/gone/a/b", "/root/", upURL.Host},
		{"escaped segment kept", "/svc/a%2Fb", "/base/a%2Fb", upURL.Host},
		{"escaped slash stays in its segment", "/svc/a%2Fb/c", "/base/a%2Fb/c", upURL.Host},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", front.URL+tt.path, strings.NewReader("payload"))
			req.Host = "client.example"
			req.Header.Set("X-Forwarded-For", "203.0.113.9")
			req.Header.Set("Connection", "X-Hop")
			req.Header.Set("X-Hop", "drop me")
			req.Header.Set("Keep-Alive", "timeout=5")
			req.Header.Set("X-Custom", "kept")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "from upstream" || resp.Header.Get("X-Upstream") != "yes" {
				t.Fatalf("answer = %d %q, want 200 from the upstream", resp.StatusCode, body)
			}
			s := last.Load()
			if s.Path != tt.wantPath || s.Host != tt.wantHost || s.Method != "POST" || s.Body != "payload" {
				t.Errorf("upstream saw %s %s Host %s body %q, want POST %s Host %s body \"payload\"", s.Method, s.Path, s.Host, s.Body, tt.wantPath, tt.wantHost)
			}
			if strings.Contains(tt.path, "?") && s.RawQuery != "q=1&q=2" {
				t.Errorf("upstream query = %q, want q=1&q=2", s.RawQuery)
			}
			if got := s.Header.Get("X-Forwarded-For"); got != "203.0.113.9, 127.0.0.1" {
				t.Errorf("X-Forwarded-For = %q, want the client's value with the peer appended", got)
			}
			if s.Header.Get("X-Forwarded-Host") != "client.example" || s.Header.Get("X-Forwarded-Proto") != "http" {
				t.Errorf("X-Forwarded-Host/Proto = %q/%q, want client.example/http", s.Header.Get("X-Forwarded-Host"), s.Header.Get("X-Forwarded-Proto"))
			}
			if s.Header.Get("X-Hop") != "" || s.Header.Get("Keep-Alive") != "" || s.Header.Get("X-Custom") != "kept" {
				t.Errorf("headers upstream = %v: hop-by-hop must go, X-Custom must stay", s.Header)
			}
		})
	}
}

func TestRoutingFirstMatchAnd404(t *testing.T) {
	up, last := recordingUpstream(t)
	get := upstreamRoute("get-only", "/api/**", up.URL)
	get.Match.Methods = []string{"GET"}
	hello := config.Route{ID: "hello", Match: config.Match{Path: "/api/hello"}, Respond: &config.Respond{Status: 201, Body: "hi\n", Headers: map[string]string{"X-A": "b"}}}
	later := config.Route{ID: "later", Match: config.Match{Path: "/api/hello"}, Respond: &config.Respond{Status: 200, Body: "later\n"}}
	g := newTestGateway(t, testConfig(get, hello, later))
	front := httptest.NewServer(g)
	defer front.Close()

	resp, err := http.Get(front.URL + "/api/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || last.Load() == nil {
		t.Errorf("GET /api/hello = %d, want the first route (upstream) to take it", resp.StatusCode)
	}
	resp, err = http.Post(front.URL+"/api/hello", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || string(body) != "hi\n" || resp.Header.Get("X-A") != "b" {
		t.Errorf("POST /api/hello = %d %q, want the respond route's 201 \"hi\\n\"", resp.StatusCode, body)
	}
	for _, path := range []string{"/nothing", "/api"} {
		req, _ := http.NewRequest("DELETE", front.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		problemBody(t, resp, 404)
		resp.Body.Close()
	}
}

func TestUpstreamErrors(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	timeout := upstreamRoute("slow", "/slow", slow.URL)
	timeout.Timeout = 50 * time.Millisecond
	g := newTestGateway(t, testConfig(timeout, upstreamRoute("dead", "/dead", deadURL)))
	front := httptest.NewServer(g)
	defer front.Close()

	for _, tt := range []struct {
		path   string
		status int
	}{{"/slow", 504}, {"/dead", 502}} {
		resp, err := http.Get(front.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		problemBody(t, resp, tt.status)
		resp.Body.Close()
	}
}

func TestStreamingIsFlushed(t *testing.T) {
	second := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first\n"))
		w.(http.Flusher).Flush()
		<-second
		w.Write([]byte("second\n"))
	}))
	defer up.Close()
	r := upstreamRoute("stream", "/s", up.URL)
	r.Timeout = 10 * time.Second
	g := newTestGateway(t, testConfig(r))
	front := httptest.NewServer(g)
	defer front.Close()

	resp, err := http.Get(front.URL + "/s")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n') // arrives while the upstream still holds the rest
	if err != nil || line != "first\n" {
		t.Fatalf("first line = %q, %v; want \"first\\n\" before the upstream finishes", line, err)
	}
	close(second)
	line, _ = br.ReadString('\n')
	if line != "second\n" {
		t.Errorf("second line = %q", line)
	}
}

func TestHeaderLimitAnswersJSON431(t *testing.T) {
	cfg := testConfig(config.Route{ID: "hello", Match: config.Match{Path: "/hello"}, Respond: &config.Respond{Status: 200, Body: "hi"}})
	g := newTestGateway(t, cfg)
	srv := startServer(t, g)
	base := "http://" + srv.Addr().String()

	get := func(extra int) *http.Response {
		req, _ := http.NewRequest("GET", base+"/hello", nil)
		if extra > 0 {
			req.Header.Set("X-Big", strings.Repeat("a", extra))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	small := get(15 << 10)
	small.Body.Close()
	if small.StatusCode != 200 {
		t.Errorf("15 KiB header: status %d, want 200", small.StatusCode)
	}
	for _, size := range []int{16 << 10, 31 << 10} {
		resp := get(size)
		problemBody(t, resp, 431)
		resp.Body.Close()
	}
	// Beyond twice the bound the server stops reading and Go answers.
	huge := get(1 << 20)
	huge.Body.Close()
	if huge.StatusCode != 431 {
		t.Errorf("1 MiB header: status %d, want 431", huge.StatusCode)
	}
}
