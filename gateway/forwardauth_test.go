package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gw/sluice/gateway/admin"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// forwardRoute is a forward_auth route on auth path path reading from
// from, limited by "three" per user (header X-User-Id) and forwarded path.
func forwardRoute(id, path, from string) config.Route {
	return config.Route{ID: id, Match: config.Match{Path: path},
		ForwardAuth: &config.ForwardAuth{From: from, DenyStatus: 429},
		Limits: []config.Limit{{Policy: "three", Cost: 1, OnEmptyKey: httplimit.EmptyKeyDeny,
			Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User-Id"}, {Source: httplimit.SourcePath}}}}}
}

// authCall sends an auth request from peer (ip:port) to g with the header
// pairs and returns the recorded answer.
func authCall(t *testing.T, g *Gateway, method, target, peer string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr = peer
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	return rec
}

// TestForwardAuthSources decides the original request each source
// describes: three admitted (200, no body, the rate-limit headers), then a
// 429 with Retry-After and the problem body; another original path is
// another budget, so the key reads the original path, not the auth path.
func TestForwardAuthSources(t *testing.T) {
	envoy := forwardRoute("envoy", "/_sluice/**", config.FromRequest)
	envoy.StripPrefix = 1
	g := newTestGateway(t, testConfig(
		forwardRoute("traefik", "/auth/traefik", config.FromXForwarded),
		forwardRoute("nginx", "/auth/nginx", config.FromXOriginal),
		envoy,
	))
	for _, c := range []struct {
		name     string
		describe func(path string) (method, target string, header []string)
	}{
		{"x-forwarded", func(p string) (string, string, []string) {
			return "GET", "/auth/traefik", []string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", p + "?q=1", "X-Forwarded-Host", "app.test"}
		}},
		{"x-original", func(p string) (string, string, []string) {
			return "GET", "/auth/nginx", []string{"X-Original-Method", "POST", "X-Original-URI", p, "X-Forwarded-Host", "app.test"}
		}},
		{"request", func(p string) (string, string, []string) { return "POST", "/_sluice" + p + "?q=1", nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			send := func(path string) *httptest.ResponseRecorder {
				method, target, header := c.describe(path)
				return authCall(t, g, method, target, "192.0.2.1:1234", append(header, "X-User-Id", "alice")...)
			}
			for i, want := range []string{"2", "1", "0"} {
				rec := send("/api/orders")
				if rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("X-Ratelimit-Remaining") != want ||
					rec.Header().Get("Ratelimit-Policy") != `"three";q=3;w=3600` {
					t.Fatalf("auth request %d = %d %q %v, want 200, no body, X-RateLimit-Remaining %s", i+1, rec.Code, rec.Body, rec.Header(), want)
				}
			}
			rec := send("/api/orders")
			if rec.Code != 429 || rec.Header().Get("Retry-After") == "" || rec.Header().Get("X-Ratelimit-Remaining") != "0" ||
				rec.Header().Get("Content-Type") != "application/problem+json" || !strings.Contains(rec.Body.String(), `"violated-policies":["three"]`) {
				t.Errorf("4th auth request = %d %v %s, want 429 with Retry-After, the headers and the problem body", rec.Code, rec.Header(), rec.Body)
			}
			if rec := send("/api/items"); rec.Code != 200 || rec.Header().Get("X-Ratelimit-Remaining") != "2" {
				t.Errorf("another original path = %d remaining %q, want 200 with its own budget (2 left)", rec.Code, rec.Header().Get("X-Ratelimit-Remaining"))
			}
		})
	}
}

// TestForwardAuthMatch routes original requests among forward_auth routes
// on one auth path by forward_auth.match (method, path and host of the
// original request), and never hands an auth request that no forward_auth
// route takes to a later upstream route: it is a 404.
func TestForwardAuthMatch(t *testing.T) {
	var contacted atomic.Int64
	up := httptestServer(t, func(w http.ResponseWriter, r *http.Request) { contacted.Add(1) })
	login := forwardRoute("login", "/auth", config.FromXForwarded)
	login.ForwardAuth.Match = &config.Match{Path: "/login", Methods: []string{"POST"}, Host: "app.test"}
	login.Limits[0].Key = httplimit.Key{{Source: httplimit.SourceConst, Name: "login"}}
	api := forwardRoute("api", "/auth", config.FromXForwarded)
	api.ForwardAuth.Match = &config.Match{Path: "/api/**"}
	g := newTestGateway(t, testConfig(login, api, upstreamRoute("catch-all", "/**", up)))

	auth := func(method, uri, host string) int {
		return authCall(t, g, "GET", "/auth", "192.0.2.1:1234", "X-User-Id", "bob",
			"X-Forwarded-Method", method, "X-Forwarded-Uri", uri, "X-Forwarded-Host", host).Code
	}
	for i := range 3 {
		if code := auth("POST", "/login", "app.test:443"); code != 200 {
			t.Fatalf("POST /login %d = %d, want 200", i+1, code)
		}
	}
	if code := auth("POST", "/login", "APP.test"); code != 429 {
		t.Errorf("4th POST /login = %d, want 429 (route login's const budget)", code)
	}
	for _, c := range []struct {
		method, uri, host string
		want              int
	}{
		{"GET", "/api/x", "app.test", 200},      // route api
		{"GET", "/login", "app.test", 404},      // login takes POST only, api not /login
		{"POST", "/login", "other.test", 404},   // login's host
		{"GET", "/api/../login", "a.test", 404}, // path rules: a dot segment matches no route
	} {
		if code := auth(c.method, c.uri, c.host); code != c.want {
			t.Errorf("%s %s (host %s) = %d, want %d", c.method, c.uri, c.host, code, c.want)
		}
	}
	if n := contacted.Load(); n != 0 {
		t.Errorf("the upstream of the catch-all route saw %d auth requests, want 0", n)
	}
	if rec := authCall(t, g, "GET", "/elsewhere", "192.0.2.1:1234"); rec.Code != 200 || contacted.Load() != 1 {
		t.Errorf("GET /elsewhere = %d, upstream saw %d; want the catch-all route to proxy it", rec.Code, contacted.Load())
	}
}

// TestForwardAuthHostileInput: an auth request that describes no original
// request sluice can decide is answered 4xx, never decided as another
// request: the budget of the one key every case would use stays whole.
func TestForwardAuthHostileInput(t *testing.T) {
	rt := forwardRoute("auth", "/auth", config.FromXForwarded)
	rt.Limits[0].Key = httplimit.Key{{Source: httplimit.SourceConst, Name: "k"}}
	g := newTestGateway(t, testConfig(rt))
	ok := []string{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/x", "X-Forwarded-Host", "app.test"}
	with := func(name, value string) []string {
		h := append([]string(nil), ok...)
		for i := 0; i < len(h); i += 2 {
			if h[i] == name {
				h[i+1] = value
			}
		}
		return h
	}
	without := func(name string) []string {
		var h []string
		for i := 0; i < len(ok); i += 2 {
			if ok[i] != name {
				h = append(h, ok[i], ok[i+1])
			}
		}
		return h
	}
	for _, c := range []struct {
		name   string
		header []string
		want   int
	}{
		{"no uri", without("X-Forwarded-Uri"), 400},
		{"no method", without("X-Forwarded-Method"), 400},
		{"no host", without("X-Forwarded-Host"), 400},
		{"empty uri", with("X-Forwarded-Uri", ""), 400},
		{"two uris", append(append([]string(nil), ok...), "X-Forwarded-Uri", "/cheap"), 400},
		{"absolute uri", with("X-Forwarded-Uri", "http://evil.test/x"), 400},
		{"asterisk", with("X-Forwarded-Uri", "*"), 400},
		{"bad escape", with("X-Forwarded-Uri", "/x%zz"), 400},
		{"semicolon query", with("X-Forwarded-Uri", "/x?a=1;b=2"), 400},
		{"raw # in the path", with("X-Forwarded-Uri", "/x#1"), 400},
		{"raw # in the query", with("X-Forwarded-Uri", "/x?a=1#b"), 400},
		{"method not a token", with("X-Forwarded-Method", "GE T"), 400},
		{"host list", with("X-Forwarded-Host", "a.test, b.test"), 400},
		{"host with slash", with("X-Forwarded-Host", "a.test/x"), 400},
		{"encoded NUL", with("X-Forwarded-Uri", "/x%00"), 404},
		{"dot segment", with("X-Forwarded-Uri", "/a/./x"), 404},
		{"overlong uri", with("X-Forwarded-Uri", "/"+strings.Repeat("a", 20<<10)), 431},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := authCall(t, g, "GET", "/auth", "192.0.2.1:1234", c.header...)
			if rec.Code != c.want || rec.Header().Get("X-Ratelimit-Remaining") != "" {
				t.Errorf("status %d %v %s, want %d without rate-limit headers", rec.Code, rec.Header(), rec.Body, c.want)
			}
		})
	}
	if rec := authCall(t, g, "GET", "/auth", "192.0.2.1:1234", ok...); rec.Code != 200 || rec.Header().Get("X-Ratelimit-Remaining") != "2" {
		t.Errorf("a well-formed auth request = %d, remaining %q; want 200 and 2 (nothing consumed before)", rec.Code, rec.Header().Get("X-Ratelimit-Remaining"))
	}
}

// TestForwardAuthDenyStatus: deny_status 403 (nginx's auth_request) turns
// the 429 into a 403 that keeps Retry-After and the rate-limit headers; the
// 403 of a missing key value stays a 403 without Retry-After.
func TestForwardAuthDenyStatus(t *testing.T) {
	rt := forwardRoute("nginx", "/auth", config.FromXOriginal)
	rt.ForwardAuth.DenyStatus = 403
	g := newTestGateway(t, testConfig(rt))
	h := []string{"X-Original-Method", "GET", "X-Original-URI", "/x", "X-Forwarded-Host", "app.test"}
	for range 3 {
		authCall(t, g, "GET", "/auth", "192.0.2.1:1234", append(h, "X-User-Id", "u")...)
	}
	rec := authCall(t, g, "GET", "/auth", "192.0.2.1:1234", append(h, "X-User-Id", "u")...)
	if rec.Code != 403 || rec.Header().Get("Retry-After") == "" || rec.Header().Get("X-Ratelimit-Remaining") != "0" {
		t.Errorf("4th = %d %v, want 403 with Retry-After and X-RateLimit-Remaining 0", rec.Code, rec.Header())
	}
	rec = authCall(t, g, "GET", "/auth", "192.0.2.1:1234", h...)
	if rec.Code != 403 || rec.Header().Get("Retry-After") != "" {
		t.Errorf("no X-User-Id = %d %v, want 403 without Retry-After", rec.Code, rec.Header())
	}
}

// TestForwardAuthClientIP keys on the client IP as proxied traffic does:
// X-Forwarded-For is believed from a trusted proxy, read right to left,
// and ignored from any other peer.
func TestForwardAuthClientIP(t *testing.T) {
	rt := forwardRoute("auth", "/auth", config.FromXForwarded)
	rt.Limits[0].Key = httplimit.Key{{Source: httplimit.SourceIP}}
	cfg := testConfig(rt)
	cfg.Server.TrustedProxies = []string{"192.0.2.0/24"}
	g := newTestGateway(t, cfg)
	h := []string{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/x", "X-Forwarded-Host", "app.test"}
	remaining := func(peer, xff string) string {
		t.Helper()
		rec := authCall(t, g, "GET", "/auth", peer, append(h, "X-Forwarded-For", xff)...)
		if rec.Code != 200 {
			t.Fatalf("from %s with X-Forwarded-For %q = %d %s", peer, xff, rec.Code, rec.Body)
		}
		return rec.Header().Get("X-Ratelimit-Remaining")
	}
	for _, c := range []struct{ peer, xff, want string }{
		{"192.0.2.1:1234", "198.51.100.7", "2"},
		{"192.0.2.1:1234", "203.0.113.50, 198.51.100.7", "1"}, // the proxy's entry is the rightmost
		{"192.0.2.2:1234", "198.51.100.8", "2"},
		{"203.0.113.9:1234", "198.51.100.7", "2"}, // untrusted peer: its own address is the key
		{"203.0.113.9:1234", "198.51.100.8", "1"},
	} {
		if got := remaining(c.peer, c.xff); got != c.want {
			t.Errorf("from %s with X-Forwarded-For %q: remaining %s, want %s", c.peer, c.xff, got, c.want)
		}
	}
}

// TestForwardAuthObserved: forward-auth decisions go through the same
// decision path as proxied traffic, so the metrics, the admin API's
// inspect and reset, its overrides and the dashboard's statistics see them
// under the forward_auth route's id.
func TestForwardAuthObserved(t *testing.T) {
	rt := forwardRoute("fwd", "/auth", config.FromXForwarded)
	rt.Limits[0].Key = httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User-Id"}}
	cfg := testConfig(rt)
	cfg.Admin.Token = "tok"
	cfg.Policies["big"] = config.PolicySpec{Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 1}
	g := newTestGateway(t, cfg)
	auth := func(user string) int {
		return authCall(t, g, "GET", "/auth", "192.0.2.1:1234", "X-User-Id", user,
			"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/x", "X-Forwarded-Host", "app.test").Code
	}
	for range 4 {
		auth("carol")
	}
	_, metrics, _ := call(t, g.admin, "GET", "/metrics", "")
	for _, want := range []string{
		`sluice_decisions_total{policy="three",result="allowed",route="fwd"} 3`,
		`sluice_decisions_total{policy="three",result="denied",route="fwd"} 1`,
		`sluice_requests_total{code="200",route="fwd"} 3`,
		`sluice_requests_total{code="429",route="fwd"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if v := limitsJSON(t, g, "/admin/v1/limits/fwd/carol"); len(v.Limits) != 1 || v.Limits[0].Remaining != 0 {
		t.Errorf("inspect fwd/carol = %+v, want remaining 0", v.Limits)
	}
	_, body, _ := call(t, g.admin, "GET", "/admin/v1/stats", "", bearer...)
	var s admin.StatsView
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(admin.RouteView{Route: "fwd", Admitted: 3, Denied: 1}, s.Routes[0]); diff != "" {
		t.Errorf("dashboard route counters (-want +got):\n%s", diff)
	}
	if code, _, _ := call(t, g.admin, "DELETE", "/admin/v1/limits/fwd/carol", "", bearer...); code != 204 {
		t.Fatalf("DELETE = %d, want 204", code)
	}
	if code := auth("carol"); code != 200 {
		t.Errorf("after the admin reset = %d, want 200", code)
	}
	if code, body, _ := call(t, g.admin, "PUT", "/admin/v1/overrides/fwd/dave", `{"policy":"big"}`, bearer...); code/100 != 2 {
		t.Fatalf("PUT override = %d %s", code, body)
	}
	for i := range 5 {
		if code := auth("dave"); code != 200 {
			t.Fatalf("dave's request %d under the override = %d, want 200", i+1, code)
		}
	}
}
