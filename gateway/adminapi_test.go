package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gw/sluice/gateway/admin"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// adminConfig has a route "api" limited per user (header X-User) by
// "per-user" (capacity 3), a list-keyed route and the token "tok".
func adminConfig() *config.Config {
	cfg := testConfig(
		config.Route{ID: "api", Match: config.Match{Path: "/api/**"}, Respond: &config.Respond{Status: 200, Body: "ok"},
			Limits: []config.Limit{
				{Policy: "per-user", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}}, Cost: 1, OnEmptyKey: httplimit.EmptyKeyDeny},
				{Policy: "three", Key: httplimit.Key{{Source: httplimit.SourceConst, Name: "global"}}, Cost: 1, OnEmptyKey: httplimit.EmptyKeyDeny, Shadow: true},
			}},
		config.Route{ID: "list", Match: config.Match{Path: "/list"}, Respond: &config.Respond{Status: 200, Body: "ok"},
			Limits: []config.Limit{{Policy: "per-user", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}, {Source: httplimit.SourcePath}}, Cost: 1, OnEmptyKey: httplimit.EmptyKeyDeny}}},
	)
	cfg.Policies["per-user"] = config.PolicySpec{Algorithm: ratelimit.TokenBucket, Capacity: 3, Rate: 0.001}
	cfg.Policies["vip"] = config.PolicySpec{Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 1}
	cfg.Admin.Token = "tok"
	return cfg
}

// call sends a request to h and returns status, body and headers.
func call(t *testing.T, h http.Handler, method, url, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, url, rd)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String(), rec.Header()
}

var bearer = []string{"Authorization", "Bearer tok"}

func TestAdminAuth(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"none", nil, 401},
		{"wrong bearer", []string{"Authorization", "Bearer nope"}, 401},
		{"bearer", bearer, 200},
		{"basic", []string{"Authorization", "Basic " + b64("admin:tok")}, 200},
		{"basic any user", []string{"Authorization", "Basic " + b64(":tok")}, 200},
		{"basic wrong", []string{"Authorization", "Basic " + b64("tok:x")}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/admin/", "/admin/v1/limits/api/u1", "/admin/v1/stats"} {
				code, _, h := call(t, g.admin, "GET", path, "", tc.header...)
				if code != tc.want {
					t.Errorf("GET %s = %d, want %d", path, code, tc.want)
				}
				if code == 401 && h.Get("WWW-Authenticate") != `Basic realm="sluice"` {
					t.Errorf("GET %s: WWW-Authenticate = %q", path, h.Get("WWW-Authenticate"))
				}
			}
		})
	}
	t.Run("no token configured", func(t *testing.T) {
		cfg := adminConfig()
		cfg.Admin.Token = ""
		g := newTestGateway(t, cfg)
		for _, path := range []string{"/admin/", "/admin/v1/limits/api/u1", "/admin/assets/dashboard.js"} {
			if code, _, _ := call(t, g.admin, "GET", path, "", bearer...); code != 404 {
				t.Errorf("GET %s with no token configured = %d, want 404", path, code)
			}
		}
	})
}

func b64(s string) string {
	req := httptest.NewRequest("GET", "/", nil)
	user, pw, _ := strings.Cut(s, ":")
	req.SetBasicAuth(user, pw)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// limitsJSON fetches GET /admin/v1/limits/... and decodes it.
func limitsJSON(t *testing.T, g *Gateway, path string) admin.LimitsView {
	t.Helper()
	code, body, _ := call(t, g.admin, "GET", path, "", bearer...)
	if code != 200 {
		t.Fatalf("GET %s = %d %s", path, code, body)
	}
	var v admin.LimitsView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAdminLimitsPeekAndReset(t *testing.T) {
	clock := kit.NewManualClock(time.Unix(1764100000, 0))
	g, err := New(adminConfig(), Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	serveTestEngine(t, g)
	defer g.Close()

	// A key never seen shows its full budget, and GET consumes nothing.
	for range 3 {
		v := limitsJSON(t, g, "/admin/v1/limits/api/u1")
		want := admin.LimitsView{Route: "api", Key: admin.Key{"u1"}, Limits: []admin.LimitView{{Policy: "per-user", Algorithm: "token_bucket", Limit: 3, Remaining: 3, Reset: 1764100000}}}
		if diff := cmp.Diff(want, v); diff != "" {
			t.Fatalf("GET unseen key (-want +got):\n%s", diff)
		}
	}
	// The exact JSON of docs/operations.md, "Admin API".
	if _, body, _ := call(t, g.admin, "GET", "/admin/v1/limits/api/u1", "", bearer...); body != `{"route":"api","key":"u1","limits":[{"policy":"per-user","algorithm":"token_bucket","limit":3,"remaining":3,"reset":1764100000}]}`+"\n" {
		t.Errorf("body = %s", body)
	}
	for range 2 {
		call(t, g, "GET", "/api/x", "", "X-User", "u1")
	}
	v := limitsJSON(t, g, "/admin/v1/limits/api/u1")
	if got := v.Limits[0]; got.Remaining != 1 || got.Reset <= 1764100000 {
		t.Errorf("after 2 requests: %+v, want remaining 1 and a reset in the future", got)
	}
	// The const-keyed shadow limit is addressed by its own value.
	if v := limitsJSON(t, g, "/admin/v1/limits/api/global"); len(v.Limits) != 2 || !v.Limits[1].Shadow || v.Limits[1].Remaining != 1 {
		t.Errorf("GET global = %+v, want per-user and the shadow limit with remaining 1", v.Limits)
	}
	if code, _, _ := call(t, g.admin, "DELETE", "/admin/v1/limits/api/u1", "", bearer...); code != 204 {
		t.Fatalf("DELETE = %d, want 204", code)
	}
	if v := limitsJSON(t, g, "/admin/v1/limits/api/u1"); v.Limits[0].Remaining != 3 {
		t.Errorf("after DELETE remaining = %d, want 3", v.Limits[0].Remaining)
	}
	for range 3 {
		if code, _, _ := call(t, g, "GET", "/api/x", "", "X-User", "u1"); code != 200 {
			t.Errorf("request after reset = %d, want 200", code)
		}
	}

	// Path-escaped keys and list keys.
	call(t, g, "GET", "/api/x", "", "X-User", "a/b c")
	if v := limitsJSON(t, g, "/admin/v1/limits/api/a%2Fb%20c"); !cmp.Equal(v.Key, admin.Key{"a/b c"}) || v.Limits[0].Remaining != 2 {
		t.Errorf("escaped key: %+v", v)
	}
	call(t, g, "GET", "/list", "", "X-User", "u1")
	if v := limitsJSON(t, g, "/admin/v1/limits/list?part=u1&part=/list"); !cmp.Equal(v.Key, admin.Key{"u1", "/list"}) || v.Limits[0].Remaining != 2 {
		t.Errorf("list key: %+v", v)
	}

	for _, tc := range []struct{ method, path string }{
		{"GET", "/admin/v1/limits/nope/u1"},
		{"GET", "/admin/v1/nothing"},
		{"GET", "/admin/nothing"},
	} {
		if code, _, _ := call(t, g.admin, tc.method, tc.path, "", bearer...); code != 404 {
			t.Errorf("%s %s = %d, want 404", tc.method, tc.path, code)
		}
	}
	if code, _, h := call(t, g.admin, "POST", "/admin/v1/limits/api/u1", "", bearer...); code != 405 || h.Get("Allow") == "" {
		t.Errorf("POST limits = %d (Allow %q), want 405 with Allow", code, h.Get("Allow"))
	}
	if code, _, _ := call(t, g.admin, "GET", "/admin/v1/limits/api", "", bearer...); code != 400 {
		t.Errorf("GET without a key = %d, want 400", code)
	}
}

func TestAdminOverrides(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	for range 3 {
		call(t, g, "GET", "/api/x", "", "X-User", "u1")
	}
	if code, _, _ := call(t, g, "GET", "/api/x", "", "X-User", "u1"); code != 429 {
		t.Fatalf("4th request = %d, want 429", code)
	}
	for _, body := range []string{`{"policy":"nope"}`, `{"policy":}`, `{"policy":"vip","x":1}`} {
		code, resp, _ := call(t, g.admin, "PUT", "/admin/v1/overrides/api/u1", body, bearer...)
		if code != 400 {
			t.Errorf("PUT %s = %d %s, want 400", body, code, resp)
		}
	}
	code, body, _ := call(t, g.admin, "PUT", "/admin/v1/overrides/api/u1", `{"policy":"vip"}`, bearer...)
	if code != 200 || body != `{"route":"api","key":"u1","policy":"vip"}`+"\n" {
		t.Fatalf("PUT vip = %d %s", code, body)
	}
	// The override has its own budget (state is per policy).
	if code, _, h := call(t, g, "GET", "/api/x", "", "X-User", "u1"); code != 200 || h.Get("X-Ratelimit-Limit") != "100" {
		t.Errorf("request under vip = %d, limit %s; want 200, 100", code, h.Get("X-Ratelimit-Limit"))
	}
	if v := limitsJSON(t, g, "/admin/v1/limits/api/u1"); v.Limits[0].Policy != "vip" || v.Limits[0].Remaining != 99 {
		t.Errorf("GET limits under the override = %+v", v.Limits[0])
	}
	if code, body, _ := call(t, g.admin, "GET", "/admin/v1/overrides", "", bearer...); code != 200 || !strings.Contains(body, `{"route":"api","key":"u1","policy":"vip"}`) {
		t.Errorf("GET overrides = %d %s", code, body)
	}
	// List keys get overrides through ?part=.
	if code, _, _ := call(t, g.admin, "PUT", "/admin/v1/overrides/list?part=u1&part=/list", `{"policy":"vip"}`, bearer...); code != 200 {
		t.Errorf("PUT list override = %d", code)
	}
	if _, _, h := call(t, g, "GET", "/list", "", "X-User", "u1"); h.Get("X-Ratelimit-Limit") != "100" {
		t.Errorf("list key under override: limit %s, want 100", h.Get("X-Ratelimit-Limit"))
	}
	if code, _, _ := call(t, g.admin, "DELETE", "/admin/v1/overrides/api/u1", "", bearer...); code != 204 {
		t.Errorf("DELETE override = %d, want 204", code)
	}
	if code, _, _ := call(t, g.admin, "DELETE", "/admin/v1/overrides/api/u1", "", bearer...); code != 404 {
		t.Errorf("DELETE missing override = %d, want 404", code)
	}
	// Back on per-user, whose state is still there: denied.
	if code, _, _ := call(t, g, "GET", "/api/x", "", "X-User", "u1"); code != 429 {
		t.Errorf("request after removing the override = %d, want 429 (per-user state kept)", code)
	}
}

// The overrides table lives with the store, so a reload keeps it.
func TestOverridesSurviveReload(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	call(t, g.admin, "PUT", "/admin/v1/overrides/api/u1", `{"policy":"vip"}`, bearer...)
	g2, err := New(adminConfig(), Deps{Previous: g})
	if err != nil {
		t.Fatal(err)
	}
	serveTestEngine(t, g2)
	defer g2.Close()
	if _, _, h := call(t, g2, "GET", "/api/x", "", "X-User", "u1"); h.Get("X-Ratelimit-Limit") != "100" {
		t.Errorf("after reload: limit %s, want 100 (override kept)", h.Get("X-Ratelimit-Limit"))
	}
}

func TestDashboardAndStats(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	code, body, h := call(t, g.admin, "GET", "/admin/", "", bearer...)
	if code != 200 || !strings.Contains(body, "assets/uPlot.iife.min.js") {
		t.Fatalf("GET /admin/ = %d", code)
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %s", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Errorf("the page must load nothing from elsewhere and allow no inline code")
	}
	for _, a := range []string{"uPlot.iife.min.js", "uPlot.min.css", "dashboard.js", "dashboard.css"} {
		if code, _, h := call(t, g.admin, "GET", "/admin/assets/"+a, "", bearer...); code != 200 || h.Get("Content-Security-Policy") == "" {
			t.Errorf("GET asset %s = %d", a, code)
		}
	}

	for range 5 {
		call(t, g, "GET", "/api/x", "", "X-User", "u1")
	}
	call(t, g, "GET", "/api/x", "", "X-User", "u2")
	code, body, _ = call(t, g.admin, "GET", "/admin/v1/stats", "", bearer...)
	if code != 200 {
		t.Fatalf("stats = %d", code)
	}
	var s admin.StatsView
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	// u1: 3 admitted, 2 denied; u2: 1 admitted. The shadow limit (3 in
	// all) would deny the 4th admitted request.
	if diff := cmp.Diff(admin.RouteView{Route: "api", Admitted: 4, Denied: 2, ShadowDenied: 1}, s.Routes[0]); diff != "" {
		t.Errorf("route counters (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]admin.TopKey{{Route: "api", Key: []string{core.HashKey([]string{"u1"})}, Denied: 2}}, s.TopKeys); diff != "" {
		t.Errorf("top keys (-want +got):\n%s", diff)
	}
	if !s.Store.Healthy || s.Store.Type != "memory" || s.Config.Summary == "" || len(s.Config.Routes) != 2 {
		t.Errorf("store/config: %+v %+v", s.Store, s.Config.Summary)
	}
}

func TestAccessLog(t *testing.T) {
	for _, raw := range []bool{false, true} {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		cfg := adminConfig()
		cfg.Server.AccessLog = config.AccessLog{Sample: 1, RawKeys: raw}
		g, err := New(cfg, Deps{AccessLogger: log})
		if err != nil {
			t.Fatal(err)
		}
		serveTestEngine(t, g)
		for range 4 {
			call(t, g, "GET", "/api/x", "", "X-User", "secret-user")
		}
		g.Close()
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 4 {
			t.Fatalf("raw=%v: %d access lines, want 4:\n%s", raw, len(lines), buf.String())
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[3]), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["msg"] != "access" || rec["route"] != "api" || rec["status"] != float64(429) || rec["decision"] != "limited" || rec["store"] != "store" {
			t.Errorf("raw=%v: record %v", raw, rec)
		}
		if _, ok := rec["latency_ms"].(float64); !ok {
			t.Errorf("raw=%v: no latency_ms in %v", raw, rec)
		}
		if got := strings.Contains(buf.String(), "secret-user"); got != raw {
			t.Errorf("raw=%v: raw key in log = %v", raw, got)
		}
		if keys, _ := rec["keys"].([]any); len(keys) != 2 || (!raw && keys[0] != core.HashKey([]string{"secret-user"})) {
			t.Errorf("raw=%v: keys = %v", raw, rec["keys"])
		}
	}
	var buf bytes.Buffer
	g, err := New(adminConfig(), Deps{AccessLogger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	serveTestEngine(t, g)
	defer g.Close()
	call(t, g, "GET", "/api/x", "", "X-User", "u")
	if buf.Len() != 0 {
		t.Errorf("access log off, but logged %s", buf.String())
	}
}

// TestAccessLogBoundsClientFields: what a client sends
// (the method, a raw key) reaches the access log cut to core.MaxLogField bytes
// with a marker, so a 1 MiB method does not write a 1 MiB line.
func TestAccessLogBoundsClientFields(t *testing.T) {
	var buf bytes.Buffer
	cfg := adminConfig()
	cfg.Server.AccessLog = config.AccessLog{Sample: 1, RawKeys: true}
	cfg.Server.MaxHeaderBytes = 4 << 20
	g, err := New(cfg, Deps{AccessLogger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	serveTestEngine(t, g)
	defer g.Close()
	call(t, g, strings.Repeat("M", 1<<20), "/api/x", "", "X-User", "u")
	call(t, g, "GET", "/api/x", "", "X-User", strings.Repeat("k", 1<<20))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d access lines, want 2", len(lines))
	}
	for i, field := range []string{"method", "keys"} {
		if n := len(lines[i]); n > 2*core.MaxLogField+200 {
			t.Errorf("line %d (long %s) is %d bytes, want at most %d", i, field, n, 2*core.MaxLogField+200)
		}
		if want := fmt.Sprintf("[truncated, %d bytes]", 1<<20); !strings.Contains(lines[i], want) {
			t.Errorf("line %d (long %s) has no %q marker: %.300s", i, field, want, lines[i])
		}
	}
}

// TestStatsKeysHashed: the dashboard's data shows keys
// (top limited keys, overrides) hashed as the access log does, unless
// server.access_log.raw_keys; a key on a shared screen is a leak.
func TestStatsKeysHashed(t *testing.T) {
	for _, raw := range []bool{false, true} {
		cfg := adminConfig()
		cfg.Server.AccessLog.RawKeys = raw
		g := newTestGateway(t, cfg)
		for range 5 {
			call(t, g, "GET", "/api/x", "", "X-User", "secret-user")
		}
		if code, _, _ := call(t, g.admin, "PUT", "/admin/v1/overrides/api/secret-vip", `{"policy":"vip"}`, bearer...); code/100 != 2 {
			t.Fatalf("PUT override = %d", code)
		}
		_, body, _ := call(t, g.admin, "GET", "/admin/v1/stats", "", bearer...)
		var s struct {
			TopKeys   []admin.TopKey   `json:"top_keys"`
			Overrides []admin.Override `json:"overrides"`
			Hashed    bool             `json:"keys_hashed"`
		}
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		wantTop, wantOverride := []string{core.HashKey([]string{"secret-user"})}, []string{core.HashKey([]string{"secret-vip"})}
		if raw {
			wantTop, wantOverride = []string{"secret-user"}, []string{"secret-vip"}
		}
		if len(s.TopKeys) != 1 || !slices.Equal(s.TopKeys[0].Key, wantTop) || len(s.Overrides) != 1 || !slices.Equal(s.Overrides[0].Key, wantOverride) || s.Hashed == raw {
			t.Errorf("raw_keys=%v: stats top keys %v, overrides %v, keys_hashed %v; want keys %v and %v", raw, s.TopKeys, s.Overrides, s.Hashed, wantTop, wantOverride)
		}
		if !raw && strings.Contains(body, "secret-") {
			t.Errorf("raw_keys=false: stats carry a raw key:\n%s", body)
		}
	}
}
