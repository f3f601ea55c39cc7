package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReloadEndpoint checks POST /admin/v1/reload's answers: the result of
// a reload, the problems of a refused one, 404 without a reload hook, and
// 403 for a browser's cross-origin POST (which must not reach the hook).
func TestReloadEndpoint(t *testing.T) {
	logins := NewLogins(nil)
	var calls int
	var fail error
	o := Options{Token: "tok", Logins: logins, Stats: NewStats(nil), Reload: func(context.Context) (ReloadResult, error) {
		calls++
		return ReloadResult{File: "sluice.yaml", Routes: 2}, fail
	}}
	post := func(h http.Handler, header ...string) (int, string, map[string]any) {
		t.Helper()
		req := httptest.NewRequest("POST", "/admin/v1/reload", nil)
		req.Header.Set("Authorization", "Bearer tok")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("answer %d is not JSON: %q", rec.Code, rec.Body)
		}
		return rec.Code, rec.Header().Get("Content-Type"), body
	}
	h := New(&fakeGateway{}, o)

	code, ctype, body := post(h)
	want := map[string]any{"status": "reloaded", "file": "sluice.yaml", "routes": 2.0}
	if code != 200 || ctype != "application/json" || !cmp.Equal(body, want) {
		t.Errorf("reload = %d %s %v, want 200 application/json %v", code, ctype, body, want)
	}

	fail = errors.New("sluice.yaml:3:5: routes[0]: unknown field \"colour\"\nsluice.yaml:9:1: routes: at least one route is required")
	code, ctype, body = post(h)
	wantErrors := []any{`sluice.yaml:3:5: routes[0]: unknown field "colour"`, "sluice.yaml:9:1: routes: at least one route is required"}
	if code != 422 || ctype != "application/problem+json" || !cmp.Equal(body["errors"], wantErrors) || body["status"] != 422.0 {
		t.Errorf("refused reload = %d %s %v, want 422 problem+json with errors %q", code, ctype, body, wantErrors)
	}

	before := calls
	if code, _, _ := post(h, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); code != 403 || calls != before {
		t.Errorf("cross-origin reload = %d with %d calls, want 403 and no call", code, calls-before)
	}

	o.Reload = nil
	if code, _, _ := post(New(&fakeGateway{}, o)); code != 404 {
		t.Errorf("reload without a hook = %d, want 404", code)
	}
}
