package core

import (
	"github.com/sluice-gw/sluice/httplimit"

	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
)

// TestDotSegmentsMatchNoRoute: a path with a "." or ".." segment, written as
// such or escaped, matches no route, so it is never forwarded for an upstream
// to resolve outside the route's prefix or base path (docs/operations.md,
// "Path rules"; see match).
func TestDotSegmentsMatchNoRoute(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/api/../private/x", false},
		{"/api/%2e%2e/private/x", false},
		{"/api/%2E%2E/private", false},
		{"/api%2F..%2Fprivate", false},
		{"/api/./x", false},
		{"/api/.", false},
		{"/api/..", false},
		{"/api/..x", true},
		{"/api/x..", true},
		{"/api/.well-known", true},
		{"/api/...", true},
	}
	m := newMatcher(config.Match{Path: "/api/**"})
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "http://x/", nil)
		r.URL.RawPath = tt.path
		r.URL.Path = mustUnescape(t, tt.path)
		if got := matches(m, r); got != tt.want {
			t.Errorf("match(/api/**, %q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func mustUnescape(t *testing.T, p string) string {
	t.Helper()
	u := httptest.NewRequest("GET", "http://x"+p, nil).URL
	return u.Path
}

// matches runs m on r as Table.Decide does.
func matches(m *matcher, r *http.Request) bool {
	in := newInbound(r.Host, r.URL.EscapedPath(), r.URL.Path, nil)
	return m.match(httplimit.HTTPRequest(r), &in)
}
