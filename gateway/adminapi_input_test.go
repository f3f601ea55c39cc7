package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// adminProblem decodes a problem+json answer and fails unless it has that
// content type and status.
func adminProblem(t *testing.T, what string, code int, body string, h map[string][]string, want int) string {
	t.Helper()
	if code != want {
		t.Fatalf("%s = %d %s, want %d", what, code, body, want)
	}
	if ct := h["Content-Type"]; len(ct) != 1 || ct[0] != "application/problem+json" {
		t.Errorf("%s: Content-Type %v, want application/problem+json", what, ct)
	}
	var p struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != want || p.Detail == "" {
		t.Errorf("%s: body %s is not a problem with status %d and a detail", what, body, want)
	}
	return p.Detail
}

// A query string Go cannot parse is refused as a whole: every admin call
// with such a query is 400 and acts on nothing, so ?part=%zz&part=victim
// never acts on the one-part key ["victim"].
func TestAdminMalformedQuery(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	// An override the DELETE rows must leave in place.
	if code, body, _ := call(t, g.admin, "PUT", "/admin/v1/overrides/api/keep", `{"policy":"vip"}`, bearer...); code != 200 {
		t.Fatalf("PUT keep = %d %s", code, body)
	}
	call(t, g, "GET", "/api/x", "", "X-User", "b")
	for _, tc := range []struct {
		name, method, url, body string
	}{
		{"put override, bad part first", "PUT", "/admin/v1/overrides/api?part=%zz&part=victim", `{"policy":"vip"}`},
		{"put override, bad escape in another param", "PUT", "/admin/v1/overrides/api?part=victim&x=%zz", `{"policy":"vip"}`},
		{"put override, semicolon", "PUT", "/admin/v1/overrides/api?part=victim;part=x", `{"policy":"vip"}`},
		{"put override, path key", "PUT", "/admin/v1/overrides/api/victim?x=%zz", `{"policy":"vip"}`},
		{"get override", "GET", "/admin/v1/overrides/api?part=%zz&part=keep", ""},
		{"delete override", "DELETE", "/admin/v1/overrides/api?part=%zz&part=keep", ""},
		{"delete override, path key", "DELETE", "/admin/v1/overrides/api/keep?%zz", ""},
		{"get limits", "GET", "/admin/v1/limits/api?part=%zz&part=b", ""},
		{"get limits, path key", "GET", "/admin/v1/limits/api/b?part=%zz", ""},
		{"delete limits", "DELETE", "/admin/v1/limits/api?part=%zz&part=b", ""},
		{"list overrides", "GET", "/admin/v1/overrides?%zz", ""},
		{"stats", "GET", "/admin/v1/stats?a=%zz", ""},
		{"dashboard", "GET", "/admin/?%zz", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, h := call(t, g.admin, tc.method, tc.url, tc.body, bearer...)
			detail := adminProblem(t, tc.method+" "+tc.url, code, body, h, 400)
			if !strings.Contains(detail, "query") {
				t.Errorf("%s %s: detail %q does not name the query", tc.method, tc.url, detail)
			}
		})
	}
	// Nothing was acted on.
	if code, _, _ := call(t, g.admin, "GET", "/admin/v1/overrides/api/victim", "", bearer...); code != 404 {
		t.Errorf("GET override of victim = %d, want 404 (never set)", code)
	}
	if code, _, _ := call(t, g.admin, "GET", "/admin/v1/overrides/api/keep", "", bearer...); code != 200 {
		t.Errorf("GET override of keep = %d, want 200 (never deleted)", code)
	}
	if v := limitsJSON(t, g, "/admin/v1/limits/api/b"); v.Limits[0].Remaining != 2 {
		t.Errorf("limits of b after the bad DELETE: remaining %d, want 2 (never reset)", v.Limits[0].Remaining)
	}
	// The token is checked before the query: no token, 401.
	if code, _, _ := call(t, g.admin, "GET", "/admin/v1/limits/api?part=%zz", ""); code != 401 {
		t.Errorf("bad query without a token = %d, want 401", code)
	}
}

// A body over the 64 KiB cap is 413 and says so (not a 400 "...: EOF"
// for a body read as cut short).
func TestAdminBodyTooLarge(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	for _, tc := range []struct{ name, body string }{
		{"long value", `{"policy":"` + strings.Repeat("v", 70<<10) + `"}`},
		{"object then padding", `{"policy":"vip"}` + strings.Repeat(" ", 70<<10)},
		{"padding then object", strings.Repeat(" ", 70<<10) + `{"policy":"vip"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, h := call(t, g.admin, "PUT", "/admin/v1/overrides/api/u1", tc.body, bearer...)
			detail := adminProblem(t, "PUT "+tc.name, code, body, h, 413)
			if !strings.Contains(detail, "larger than") || !strings.Contains(detail, "64 KiB") {
				t.Errorf("detail %q, want it to say the body is larger than 64 KiB", detail)
			}
		})
	}
	if code, _, _ := call(t, g.admin, "GET", "/admin/v1/overrides/api/u1", "", bearer...); code != 404 {
		t.Errorf("GET override after the 413s = %d, want 404 (never set)", code)
	}
	// Right at the cap is still fine.
	body := `{"policy":"vip"}`
	body += strings.Repeat(" ", 64<<10-len(body))
	if code, resp, _ := call(t, g.admin, "PUT", "/admin/v1/overrides/api/u1", body, bearer...); code != 200 {
		t.Errorf("PUT of exactly 64 KiB = %d %s, want 200", code, resp)
	}
}

// Data after the JSON object is refused with 400.
func TestAdminBodyTrailingData(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	for _, body := range []string{
		`{"policy":"vip"}{"policy":"nope"}`,
		`{"policy":"vip"} x`,
		`{"policy":"vip"}}`,
		`{"policy":"vip"}]`,
		`{"policy":"vip"} 1`,
		"{\"policy\":\"vip\"}\n\v",
	} {
		code, resp, h := call(t, g.admin, "PUT", "/admin/v1/overrides/api/u1", body, bearer...)
		adminProblem(t, "PUT "+body, code, resp, h, 400)
	}
	if code, _, _ := call(t, g.admin, "GET", "/admin/v1/overrides/api/u1", "", bearer...); code != 404 {
		t.Errorf("GET override after the 400s = %d, want 404 (never set)", code)
	}
	// Whitespace around the object is fine.
	if code, resp, _ := call(t, g.admin, "PUT", "/admin/v1/overrides/api/u1", " \t{\"policy\":\"vip\"}\r\n \t\n", bearer...); code != 200 {
		t.Errorf("PUT with surrounding whitespace = %d %s, want 200", code, resp)
	}
}

// The auth scheme is case-insensitive (RFC 9110 §11.1).
func TestAdminAuthSchemeCase(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	basic := b64("admin:tok")
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"Bearer tok", 200},
		{"bearer tok", 200},
		{"BEARER tok", 200},
		{"bEaReR tok", 200},
		{"Bearer  tok", 200}, // 1*SP
		{"bearer nope", 401},
		{"bearer", 401},
		{"bearer ", 401},
		{"Bearertok", 401},
		{"Bearer: tok", 401},
		{"Token tok", 401},
		{"tok", 401},
		{"Basic " + basic, 200},
		{"basic " + basic, 200},
		{"BASIC " + basic, 200},
		{"basic " + b64("admin:nope"), 401},
	} {
		t.Run(tc.auth, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/admin/v1/stats", nil)
			req.Header.Set("Authorization", tc.auth)
			rec := httptest.NewRecorder()
			g.admin.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("Authorization %q = %d, want %d", tc.auth, rec.Code, tc.want)
			}
		})
	}
}

// Every admin answer shows a key the same way ("key" in docs/operations.md, "Admin API"): one part as
// a string, several parts as an array, however the key was given.
func TestAdminKeyShape(t *testing.T) {
	g := newTestGateway(t, adminConfig())
	for _, tc := range []struct {
		name, method, url, body, want string
	}{
		{"put one-part", "PUT", "/admin/v1/overrides/api/u5", `{"policy":"vip"}`, `{"route":"api","key":"u5","policy":"vip"}`},
		{"get one-part", "GET", "/admin/v1/overrides/api/u5", "", `{"route":"api","key":"u5","policy":"vip"}`},
		{"get one-part as part", "GET", "/admin/v1/overrides/api?part=u5", "", `{"route":"api","key":"u5","policy":"vip"}`},
		{"put list", "PUT", "/admin/v1/overrides/list?part=u1&part=/list", `{"policy":"vip"}`, `{"route":"list","key":["u1","/list"],"policy":"vip"}`},
		{"get list", "GET", "/admin/v1/overrides/list?part=u1&part=/list", "", `{"route":"list","key":["u1","/list"],"policy":"vip"}`},
		{"list all", "GET", "/admin/v1/overrides", "", `{"overrides":[{"route":"api","key":"u5","policy":"vip"},{"route":"list","key":["u1","/list"],"policy":"vip"}]}`},
		{"limits one-part", "GET", "/admin/v1/limits/api/u5", "", `{"route":"api","key":"u5","limits":[`},
		{"limits one-part as part", "GET", "/admin/v1/limits/api?part=u5", "", `{"route":"api","key":"u5","limits":[`},
		{"limits list", "GET", "/admin/v1/limits/list?part=u1&part=/list", "", `{"route":"list","key":["u1","/list"],"limits":[`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := call(t, g.admin, tc.method, tc.url, tc.body, bearer...)
			if code != 200 || !strings.HasPrefix(body, tc.want) {
				t.Errorf("%s %s = %d %s, want 200 %s", tc.method, tc.url, code, body, tc.want)
			}
			if strings.Contains(body, `"parts"`) {
				t.Errorf("%s %s: %s has \"parts\", want \"key\" only", tc.method, tc.url, body)
			}
		})
	}
}
