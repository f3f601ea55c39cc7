package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRefusedPathDetail: the 404 for a refused path names the rule, so an
// operator sees why no route took it.
func TestRefusedPathDetail(t *testing.T) {
	g := newTestGateway(t, testConfig(upstreamRoute("api", "/api/**", "http://127.0.0.1:1")))
	tests := []struct{ path, want string }{
		{"/api//x", "an empty segment"},
		{"/api/%2e%2e/x", "a dot segment"},
		{"/api/a;b", `a ";"`},
		{"/api/a%2Fb", "allow_encoded_slash"},
		{"/other", "No route matches this request."},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "http://x/", nil)
		r.URL.RawPath, r.URL.Path = tt.path, httptest.NewRequest("GET", "http://x"+tt.path, nil).URL.Path
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		body := problemBody(t, w.Result(), 404)
		if d, _ := body["detail"].(string); !strings.Contains(d, tt.want) {
			t.Errorf("GET %s: detail %q, want it to name %q", tt.path, d, tt.want)
		}
	}
}
