package core

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// The tests of this file decide requests on a Table built from a
// configuration written in Go, with an in-process store and a Wire over an
// http.Header: no socket, no engine.

// decideConfig returns a configuration of routes with the policies the
// tests use: "three" (3 requests an hour) and "one" (one request in flight).
func decideConfig(routes ...config.Route) *config.Config {
	return &config.Config{
		Policies: map[string]config.PolicySpec{
			"three": {Algorithm: ratelimit.FixedWindow, Limit: 3, Window: time.Hour},
			"one":   {Algorithm: ratelimit.Concurrency, Limit: 1},
		},
		Routes: routes,
	}
}

// proxyRoute is a route forwarding the requests match takes to upstream.
func proxyRoute(id string, match config.Match, upstream string, limits ...config.Limit) config.Route {
	return config.Route{ID: id, Match: match, Upstream: upstream, Limits: limits}
}

// limitOn is a limit of policy keyed on the given key parts.
func limitOn(t *testing.T, policy string, key ...string) config.Limit {
	t.Helper()
	k, err := httplimit.ParseKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	return config.Limit{Policy: policy, Key: k}
}

// newDecideTable defaults and validates cfg, as config.Load does, and
// compiles it on a memory store, which also holds the leases.
func newDecideTable(t *testing.T, cfg *config.Config) *Table {
	t.Helper()
	config.ApplyDefaults(cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the test's configuration is not valid: %v", err)
	}
	st, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, err := metrics.New(metrics.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Store: func(string) ratelimit.Store { return st }, Metrics: m}
	if ls, ok := any(st).(ratelimit.LeaseStore); ok {
		o.Leases = ls
	}
	tab, err := New(cfg, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tab
}

// req is one request to decide: headers are name, value pairs.
type req struct {
	method, host, target string
	headers              []string
}

// decide decides r on tab, as an engine does, with a fresh Exchange.
func decide(tab *Table, r req) Outcome { return decideWith(tab, r, nil) }

// decideWith is decide with set, if not nil, applied to the Exchange once
// its request is reset.
func decideWith(tab *Table, r req, set func(*Exchange)) Outcome {
	h := http.Header{}
	for i := 0; i+1 < len(r.headers); i += 2 {
		h.Add(r.headers[i], r.headers[i+1])
	}
	method, host := r.method, r.host
	if method == "" {
		method = "GET"
	}
	if host == "" {
		host = "gw.test"
	} else if host == "-" {
		host = ""
	}
	peer := netip.MustParseAddrPort("192.0.2.7:40000")
	x := new(Exchange)
	x.Req.Reset(&headerWire{h: h, remote: peer.String()}, method, []byte(host), []byte(r.target), peer)
	if set != nil {
		set(x)
	}
	return tab.Decide(x)
}

// routeID is the id of the route that took out, "" for none.
func routeID(out Outcome) string {
	if out.Route == nil {
		return ""
	}
	return out.Route.ID()
}

// detail returns the detail of out's problem+json body, failing when the
// body is not one of out.Status.
func detail(t *testing.T, out Outcome) string {
	t.Helper()
	var body struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(out.Body, &body); err != nil {
		t.Fatalf("status %d: the body %q is not problem+json: %v", out.Status, out.Body, err)
	}
	if body.Status != out.Status {
		t.Errorf("problem body's status %d, the answer's %d", body.Status, out.Status)
	}
	return body.Detail
}

// remaining is out's X-RateLimit-Remaining, "" without rate-limit headers.
func remaining(out Outcome) string {
	if out.Result == nil || !out.Result.HasRateLimitHeaders() {
		return ""
	}
	return string(out.Result.RateLimitHeader(slices.Index(httplimit.RateLimitHeaderNames[:], httplimit.HeaderRemaining)))
}

// TestDecideRouting: the first route whose match holds takes a request
// (GET taking HEAD too, host, headers and query compared); a proxy route's
// Outcome forwards it to that route's upstream; a request no route takes is
// answered 404 with a detail naming the path rule it broke; a target or
// query that does not parse is answered 400.
func TestDecideRouting(t *testing.T) {
	tab := newDecideTable(t, decideConfig(
		proxyRoute("get-only", config.Match{Path: "/items", Methods: []string{"GET"}}, "http://get.test"),
		proxyRoute("by-host", config.Match{Path: "/items", Host: "api.test"}, "http://host.test"),
		proxyRoute("by-header", config.Match{Path: "/items", Headers: map[string]string{"X-Env": "canary"}}, "http://canary.test"),
		proxyRoute("by-query", config.Match{Path: "/search", Query: map[string]string{"lang": "en"}}, "http://en.test"),
		proxyRoute("first", config.Match{Path: "/dup/**"}, "http://first.test"),
		proxyRoute("second", config.Match{Path: "/dup/**"}, "http://second.test"),
		proxyRoute("encoded", config.Match{Path: "/repos/*/files", AllowEncodedSlash: true}, "http://repos.test"),
		proxyRoute("api", config.Match{Path: "/api/**"}, "http://api.test"),
	))
	for _, tc := range []struct {
		name string
		req
		route    string // "" for none
		status   int    // 0: forwarded
		upstream string // the upstream host a forwarded request goes to
		detail   string // a part of the answer's detail
	}{
		{name: "GET", req: req{target: "/items"}, route: "get-only", upstream: "get.test"},
		{name: "HEAD under GET", req: req{method: "HEAD", target: "/items"}, route: "get-only", upstream: "get.test"},
		{name: "host", req: req{method: "POST", host: "api.test", target: "/items"}, route: "by-host", upstream: "host.test"},
		{name: "host with port and case", req: req{method: "POST", host: "API.test:8443", target: "/items"}, route: "by-host", upstream: "host.test"},
		{name: "header", req: req{method: "POST", host: "other.test", target: "/items", headers: []string{"X-Env", "canary"}}, route: "by-header", upstream: "canary.test"},
		{name: "header value differs", req: req{method: "POST", target: "/items", headers: []string{"X-Env", "Canary"}}, status: 404, detail: "No route matches this request."},
		{name: "method", req: req{method: "DELETE", target: "/items"}, status: 404, detail: "No route matches this request."},
		{name: "query", req: req{target: "/search?q=x&lang=en"}, route: "by-query", upstream: "en.test"},
		{name: "query value differs", req: req{target: "/search?lang=fr"}, status: 404, detail: "No route matches this request."},
		{name: "first matching route", req: req{target: "/dup/x"}, route: "first", upstream: "first.test"},
		{name: "absolute-form target", req: req{target: "http://elsewhere.test/api/x"}, route: "api", upstream: "api.test"},
		{name: "empty segment", req: req{target: "/api//x"}, status: 404, detail: "No route takes a path with an empty segment"},
		{name: "dot segment", req: req{target: "/api/%2e%2e/x"}, status: 404, detail: "No route takes a path with a dot segment"},
		{name: "semicolon", req: req{target: "/api/a;b"}, status: 404, detail: `No route takes a path with a ";"`},
		{name: "control character", req: req{target: "/api/a%00"}, status: 404, detail: "No route takes a path with a control character"},
		{name: "encoded slash", req: req{target: "/api/a%2Fb"}, status: 404, detail: "allow_encoded_slash"},
		{name: "encoded slash allowed", req: req{target: "/repos/group%2Fproject/files"}, route: "encoded", upstream: "repos.test"},
		{name: "malformed query", req: req{target: "/api/x?a=%zz"}, status: 400, detail: "The query string cannot be parsed"},
		{name: "query with a semicolon", req: req{target: "/api/x?a=1;b=2"}, status: 400, detail: "The query string cannot be parsed"},
		{name: "malformed target", req: req{target: "/api/%zz"}, status: 400, detail: "The request target cannot be parsed."},
		{name: "fragment", req: req{target: "/api/x#frag"}, status: 400, detail: `request-target holds a raw "#"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := decide(tab, tc.req)
			if got := routeID(out); got != tc.route {
				t.Errorf("route %q, want %q", got, tc.route)
			}
			if tc.status == 0 {
				if !out.Forward || !out.Admitted || out.Status != 0 || out.Body != nil {
					t.Fatalf("forward %v admitted %v, status %d body %q; want it forwarded", out.Forward, out.Admitted, out.Status, out.Body)
				}
				if got := out.Route.Upstream().Target.Host; got != tc.upstream {
					t.Errorf("forwarded to %q, want %q", got, tc.upstream)
				}
				return
			}
			if out.Forward || out.Admitted || out.Status != tc.status {
				t.Fatalf("forward %v admitted %v, status %d; want status %d", out.Forward, out.Admitted, out.Status, tc.status)
			}
			if d := detail(t, out); !strings.Contains(d, tc.detail) {
				t.Errorf("detail %q, want it to hold %q", d, tc.detail)
			}
			if out.Result != nil || out.RetryAfter != 0 {
				t.Errorf("Result %v, RetryAfter %d on a request no limit decided", out.Result, out.RetryAfter)
			}
		})
	}
}

// TestDecideKeys: a limit keyed on a header gives each value its own
// budget, and a request past its budget is refused 429 with the limits'
// Result and a Retry-After; a request whose key is empty is refused 403
// (on_empty_key deny, the default) without using anyone's budget.
func TestDecideKeys(t *testing.T) {
	tab := newDecideTable(t, decideConfig(
		proxyRoute("users", config.Match{Path: "/u/**"}, "http://users.test", limitOn(t, "three", "header:X-User-Id")),
	))
	alice := req{target: "/u/x", headers: []string{"X-User-Id", "alice"}}
	bob := req{target: "/u/x", headers: []string{"X-User-Id", "bob"}}
	for i, want := range []string{"2", "1", "0"} {
		out := decide(tab, alice)
		if !out.Forward || out.Result == nil || remaining(out) != want {
			t.Fatalf("alice's request %d: forward %v, status %d, remaining %q; want forwarded with %s remaining", i+1, out.Forward, out.Status, remaining(out), want)
		}
	}
	out := decide(tab, alice)
	if out.Forward || out.Admitted || out.Status != 429 || routeID(out) != "users" {
		t.Fatalf("alice's 4th request: forward %v admitted %v, status %d, route %q; want 429 on users", out.Forward, out.Admitted, out.Status, routeID(out))
	}
	if out.Result == nil || out.Result.Status != 429 || remaining(out) != "0" {
		t.Errorf("alice's 4th request: Result %+v, remaining %q; want the limits' 429 with 0 remaining", out.Result, remaining(out))
	}
	if out.RetryAfter <= 0 || out.RetryAfter > 3600 || out.RetryAfter != out.Result.RetryAfter {
		t.Errorf("alice's 4th request: RetryAfter %d, want the Result's (%d), within the hour's window", out.RetryAfter, out.Result.RetryAfter)
	}
	if d := detail(t, out); d == "" {
		t.Error("the 429 has no detail")
	}
	if out := decide(tab, bob); !out.Forward || remaining(out) != "2" {
		t.Errorf("bob after alice's budget ran out: forward %v, status %d, remaining %q; want forwarded with 2 remaining", out.Forward, out.Status, remaining(out))
	}
	for _, anon := range []req{{target: "/u/x"}, {target: "/u/x", headers: []string{"X-User-Id", "  "}}} {
		out := decide(tab, anon)
		if out.Forward || out.Admitted || out.Status != 403 || routeID(out) != "users" {
			t.Errorf("X-User-Id %q: forward %v, status %d, route %q; want 403 on users", anon.headers, out.Forward, out.Status, routeID(out))
			continue
		}
		if d := detail(t, out); d == "" {
			t.Errorf("X-User-Id %q: the 403 has no detail", anon.headers)
		}
	}
	if out := decide(tab, bob); !out.Forward || remaining(out) != "1" {
		t.Errorf("bob after the requests without a key: forward %v, remaining %q; want 1 remaining", out.Forward, remaining(out))
	}
}

// fwdAuth is an auth request of a proxy describing the original request
// method uri on host in X-Forwarded-*, with more header pairs.
func fwdAuth(method, uri, host string, more ...string) req {
	h := []string{"X-Forwarded-Method", method, "X-Forwarded-Uri", uri, "X-Forwarded-Host", host}
	return req{target: "/auth", headers: append(h, more...)}
}

// TestDecideForwardAuth: a forward_auth route reads the original request
// from X-Forwarded-*; its limits decide that request (keys read its path);
// admitted, the answer is 200 with no body and the limits' Result; refused,
// forward_auth.deny_status replaces the 429. A missing header is a 400 that
// names it; an original request no forward_auth route takes is a 404, never
// passed on to a later proxy route.
func TestDecideForwardAuth(t *testing.T) {
	tab := newDecideTable(t, decideConfig(
		config.Route{ID: "auth-api", Match: config.Match{Path: "/auth"},
			ForwardAuth: &config.ForwardAuth{From: config.FromXForwarded, Match: &config.Match{Path: "/api/**"}},
			Limits:      []config.Limit{limitOn(t, "three", "header:X-User-Id")}},
		config.Route{ID: "auth-admin", Match: config.Match{Path: "/auth"},
			ForwardAuth: &config.ForwardAuth{From: config.FromXForwarded, Match: &config.Match{Path: "/admin/**"}, DenyStatus: 403},
			Limits:      []config.Limit{limitOn(t, "three", "path")}},
		proxyRoute("catch-all", config.Match{Path: "/**"}, "http://all.test"),
	))
	t.Run("admitted", func(t *testing.T) {
		out := decide(tab, fwdAuth("GET", "/api/items?page=2", "app.test", "X-User-Id", "alice"))
		if routeID(out) != "auth-api" || out.Forward || !out.Admitted || out.Status != 200 || len(out.Body) != 0 || out.Fixed != nil {
			t.Fatalf("route %q, forward %v admitted %v, status %d, body %q; want auth-api's 200 with no body", routeID(out), out.Forward, out.Admitted, out.Status, out.Body)
		}
		if out.Result == nil || remaining(out) != "2" {
			t.Errorf("Result %v, remaining %q; want the limits' result with 2 remaining", out.Result, remaining(out))
		}
	})
	t.Run("missing header", func(t *testing.T) {
		r := req{target: "/auth", headers: []string{"X-Forwarded-Method", "GET", "X-Forwarded-Host", "app.test", "X-User-Id", "alice"}}
		out := decide(tab, r)
		if routeID(out) != "auth-api" || out.Admitted || out.Status != 400 {
			t.Fatalf("route %q, admitted %v, status %d; want auth-api's 400", routeID(out), out.Admitted, out.Status)
		}
		if d := detail(t, out); !strings.Contains(d, "has no X-Forwarded-Uri header") {
			t.Errorf("detail %q does not name the missing X-Forwarded-Uri", d)
		}
	})
	t.Run("header given twice", func(t *testing.T) {
		out := decide(tab, fwdAuth("GET", "/api/x", "app.test", "X-Forwarded-Host", "evil.test"))
		if out.Status != 400 || !strings.Contains(detail(t, out), "more than one X-Forwarded-Host") {
			t.Errorf("status %d, body %s; want a 400 naming the repeated X-Forwarded-Host", out.Status, out.Body)
		}
	})
	t.Run("no forward_auth route takes it", func(t *testing.T) {
		out := decide(tab, fwdAuth("GET", "/other", "app.test", "X-User-Id", "alice"))
		if out.Route != nil || out.Forward || out.Status != 404 {
			t.Fatalf("route %q, forward %v, status %d; want a 404 from no route", routeID(out), out.Forward, out.Status)
		}
		if d := detail(t, out); d != "No forward_auth route matches the forwarded request." {
			t.Errorf("detail %q", d)
		}
	})
	t.Run("deny_status", func(t *testing.T) {
		for i := range 3 {
			if out := decide(tab, fwdAuth("POST", "/admin/a", "app.test")); routeID(out) != "auth-admin" || out.Status != 200 {
				t.Fatalf("request %d for /admin/a: route %q, status %d; want auth-admin's 200", i+1, routeID(out), out.Status)
			}
		}
		out := decide(tab, fwdAuth("POST", "/admin/a", "app.test"))
		if routeID(out) != "auth-admin" || out.Admitted || out.Status != 403 {
			t.Fatalf("4th request for /admin/a: route %q, admitted %v, status %d; want auth-admin's 403 (deny_status)", routeID(out), out.Admitted, out.Status)
		}
		if out.Result == nil || out.Result.Status != 429 || out.RetryAfter <= 0 {
			t.Errorf("4th request for /admin/a: Result %+v, RetryAfter %d; want the limits' 429 with a Retry-After", out.Result, out.RetryAfter)
		}
		// The key is the original request's path: /admin/b has its own budget.
		if out := decide(tab, fwdAuth("POST", "/admin/b", "app.test")); out.Status != 200 || remaining(out) != "2" {
			t.Errorf("/admin/b after /admin/a's budget ran out: status %d, remaining %q; want 200 with 2 remaining", out.Status, remaining(out))
		}
	})
}

// TestDecideRespond: a respond route's Outcome is its fixed answer:
// status, headers (names canonical, Content-Type defaulting to text/plain)
// and body; its limits refuse as a proxy route's do.
func TestDecideRespond(t *testing.T) {
	tab := newDecideTable(t, decideConfig(
		config.Route{ID: "teapot", Match: config.Match{Path: "/tea"},
			Respond: &config.Respond{Status: 418, Body: "short and stout", Headers: map[string]string{"x-kind": "pot", "content-type": "text/x-tea"}},
			Limits:  []config.Limit{limitOn(t, "three", "const:all")}},
		config.Route{ID: "plain", Match: config.Match{Path: "/ok"}, Respond: &config.Respond{Body: "ok"}},
	))
	for _, tc := range []struct {
		target  string
		route   string
		status  int
		headers [][2]string
		body    string
	}{
		{"/tea", "teapot", 418, [][2]string{{"Content-Type", "text/x-tea"}, {"X-Kind", "pot"}}, "short and stout"},
		{"/ok", "plain", 200, [][2]string{{"Content-Type", "text/plain; charset=utf-8"}}, "ok"},
	} {
		out := decide(tab, req{target: tc.target})
		if routeID(out) != tc.route || out.Forward || !out.Admitted || out.Fixed == nil {
			t.Errorf("GET %s: route %q, forward %v admitted %v, fixed %v; want %s's fixed answer", tc.target, routeID(out), out.Forward, out.Admitted, out.Fixed, tc.route)
			continue
		}
		if out.Status != tc.status || string(out.Body) != tc.body || !slices.Equal(out.Fixed.Headers, tc.headers) {
			t.Errorf("GET %s: %d %v %q, want %d %v %q", tc.target, out.Status, out.Fixed.Headers, out.Body, tc.status, tc.headers, tc.body)
		}
	}
	for range 2 {
		decide(tab, req{target: "/tea"})
	}
	out := decide(tab, req{target: "/tea"})
	if out.Status != 429 || out.Fixed != nil || out.Admitted || out.Result == nil {
		t.Errorf("4th GET /tea: status %d, fixed %v, admitted %v; want the limits' 429", out.Status, out.Fixed, out.Admitted)
	}
}

// TestDecideLeases: a request admitted by a concurrency limit holds its
// lease in the Outcome until the engine releases it; while it is held, the
// key's next request is refused 429 and holds nothing, and another key is
// not held up.
func TestDecideLeases(t *testing.T) {
	tab := newDecideTable(t, decideConfig(
		proxyRoute("slow", config.Match{Path: "/slow"}, "http://slow.test", limitOn(t, "one", "header:X-User-Id")),
	))
	alice := req{target: "/slow", headers: []string{"X-User-Id", "alice"}}
	bob := req{target: "/slow", headers: []string{"X-User-Id", "bob"}}
	first := decide(tab, alice)
	if !first.Forward || first.Lease[0] == nil {
		t.Fatalf("alice's first request: forward %v, status %d, lease %v; want forwarded holding a lease", first.Forward, first.Status, first.Lease)
	}
	second := decide(tab, alice)
	if second.Forward || second.Admitted || second.Status != 429 || second.Result == nil {
		t.Fatalf("alice's second request while the first is in flight: forward %v, status %d; want 429", second.Forward, second.Status)
	}
	if second.Lease != (Held{}) {
		t.Errorf("the refused request holds %v, want no lease", second.Lease)
	}
	other := decide(tab, bob)
	if !other.Forward || other.Lease[0] == nil {
		t.Errorf("bob while alice's lease is held: forward %v, status %d; want forwarded holding a lease", other.Forward, other.Status)
	}
	other.Lease.Release()
	first.Lease.Release()
	third := decide(tab, alice)
	if !third.Forward || third.Lease[0] == nil {
		t.Fatalf("alice's request after the release: forward %v, status %d; want forwarded holding a lease", third.Forward, third.Status)
	}
	third.Lease.Release()
}
