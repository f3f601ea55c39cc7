package core

import (
	"net/http/httptest"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
)

// TestPathRules: matching sees the same segments strip_prefix counts, and
// paths that upstreams read in more than one way match no route
// (docs/operations.md, "Path rules"). An encoded slash or
// backslash is taken only by a route that allows it, and then stays part of
// its segment.
func TestPathRules(t *testing.T) {
	strict := config.Match{Path: "/api/v1/admin/**"}
	loose := config.Match{Path: "/api/v1/**"}
	allow := config.Match{Path: "/api/v1/**", AllowEncodedSlash: true}
	allowStar := config.Match{Path: "/repos/*/files", AllowEncodedSlash: true}
	tests := []struct {
		m    config.Match
		path string
		want bool
	}{
		{strict, "/api/v1/admin/x", true},
		{loose, "/api/v1/zzz/admin/x", true},
		{loose, "/api%2Fv1/zzz/admin/x", false},
		{loose, "/api%2fv1/zzz/admin/x", false},
		{loose, "/api/v1%5Czzz/admin/x", false},
		{loose, "/api/v1%5czzz", false},
		{loose, `/api/v1\zzz`, false},
		{allow, "/api%2Fv1/zzz/admin/x", false}, // "api/v1" is one segment, not "api" then "v1"
		{allow, "/api/v1/a%2Fb", true},
		{allow, "/api/v1/a%5Cb", true},
		{allowStar, "/repos/group%2Fproject/files", true},
		{allowStar, "/repos/group/project/files", false},
		{allow, "/api/v1/%2F", false},       // decoded: an empty segment
		{allow, "/api/v1/%2F..%2Fx", false}, // decoded: a dot segment
		{allow, `/api/v1/a\..\b`, false},
		{allow, "/api/v1/a%2F", true}, // decoded: a trailing slash
		{loose, "/api//v1/x", false},
		{loose, "/api/v1//admin/x", false},
		{loose, "//api/v1/x", false},
		{loose, "/api/v1/x/", true},
		{loose, "/api/v1/", true},
		{loose, "/api/v1/admin;x=1/y", false},
		{loose, "/api/v1/..;/admin/y", false},
		{loose, "/api/v1;/admin/y", false},
		{loose, "/api/v1/a%3Bb", true}, // an escaped ";" is data, as in Tomcat and Jetty
		{strict, "/api/v1/%61dmin/x", true},
		{loose, "/api/v1/admin%00/x", false}, // an upstream in C ends the path at the NUL
		{loose, "/api/v1/admin%0A", false},
		{loose, "/api/v1/a%7Fb", false},
		{allow, "/api/v1/a%1Fb", false},
		{loose, "/api/v1/a%20b", true}, // a space is data
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "http://x/", nil)
		r.URL.RawPath = tt.path
		r.URL.Path = mustUnescape(t, tt.path)
		if got := matches(newMatcher(tt.m), r); got != tt.want {
			t.Errorf("match(%s allow_encoded_slash=%v, %q) = %v, want %v", tt.m.Path, tt.m.AllowEncodedSlash, tt.path, got, tt.want)
		}
	}
}

// TestMatchHostNormalised: match.host and a Host entry in match.headers
// compare the request's host without port, case or one trailing dot; Go
// keeps Host out of the header map, so a header match on Host
// reads Request.Host.
func TestMatchHostNormalised(t *testing.T) {
	byHost := newMatcher(config.Match{Path: "/**", Host: "api.example.com"})
	byHeader := newMatcher(config.Match{Path: "/**", Headers: map[string]string{"host": "API.example.com"}})
	tests := []struct {
		host string
		want bool
	}{
		{"api.example.com", true},
		{"api.example.com.", true},
		{"API.EXAMPLE.COM.:8443", true},
		{"api.example.com..", false},
		{"www.example.com", false},
		{"api.example.com.evil", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "http://x/v1", nil)
		r.Host = tt.host
		if got := matches(byHost, r); got != tt.want {
			t.Errorf("match(host: api.example.com, Host %q) = %v, want %v", tt.host, got, tt.want)
		}
		if got := matches(byHeader, r); got != tt.want {
			t.Errorf("match(headers: {Host: API.example.com}, Host %q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}
