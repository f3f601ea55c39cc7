package core

import (
	"net/http/httptest"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
)

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"/hello", "/hello", true},
		{"/hello", "/hello/", false},
		{"/hello", "/hell", false},
		{"/api/**", "/api", true},
		{"/api/**", "/api/", true},
		{"/api/**", "/api/v1/users/7", true},
		{"/api/**", "/apix", false},
		{"/api/**", "/", false},
		{"/**", "/", true},
		{"/**", "/anything/at/all", true},
		{"/users/*", "/users/7", true},
		{"/users/*", "/users/", false},
		{"/users/*", "/users", false},
		{"/users/*", "/users/7/posts", false},
		{"/users/*/posts", "/users/7/posts", true},
		{"/users/*/posts", "/users//posts", false},
		{"/a/**/z", "/a/z", true},
		{"/a/**/z", "/a/b/c/z", true},
		{"/a/**/z", "/a/b/c", false},
		{"/", "/", true},
		{"/", "/x", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.path, func(t *testing.T) {
			m := newMatcher(config.Match{Path: tt.pattern})
			r := httptest.NewRequest("GET", "http://x"+tt.path, nil)
			if got := matches(m, r); got != tt.want {
				t.Errorf("match(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
			}
		})
	}
}

func TestMatchMethodsHostHeaders(t *testing.T) {
	m := newMatcher(config.Match{Path: "/api/**", Methods: []string{"GET", "post"}, Host: "API.example.com:443", Headers: map[string]string{"x-env": "prod"}})
	tests := []struct {
		name, method, host, env string
		want                    bool
	}{
		{"all hold", "GET", "api.example.com", "prod", true},
		{"host with port", "POST", "api.example.com:8080", "prod", true},
		{"host case", "GET", "Api.Example.Com", "prod", true},
		{"HEAD under GET", "HEAD", "api.example.com", "prod", true},
		{"method", "DELETE", "api.example.com", "prod", false},
		{"other host", "GET", "www.example.com", "prod", false},
		{"header value", "GET", "api.example.com", "Prod", false},
		{"header absent", "GET", "api.example.com", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "http://"+tt.host+"/api/x", nil)
			if tt.env != "" {
				r.Header.Set("X-Env", tt.env)
			}
			if got := matches(m, r); got != tt.want {
				t.Errorf("match(%s %s X-Env=%q) = %v, want %v", tt.method, tt.host, tt.env, got, tt.want)
			}
		})
	}
	// HEAD alone takes no GET, and POST alone no HEAD.
	for _, c := range []struct{ listed, method string }{{"HEAD", "GET"}, {"POST", "HEAD"}} {
		if matches(newMatcher(config.Match{Path: "/", Methods: []string{c.listed}}), httptest.NewRequest(c.method, "http://x/", nil)) {
			t.Errorf("methods [%s] match a %s", c.listed, c.method)
		}
	}
	v6 := newMatcher(config.Match{Path: "/", Host: "[::1]"})
	if !matches(v6, httptest.NewRequest("GET", "http://[::1]:8080/", nil)) {
		t.Error("host [::1] does not match a request to [::1]:8080")
	}
}

func TestStripSegments(t *testing.T) {
	tests := []struct {
		path string
		n    int
		want string
	}{
		{"/api/v1/x", 0, "/api/v1/x"},
		{"/api/v1/x", 1, "/v1/x"},
		{"/api/v1/x", 2, "/x"},
		{"/api/v1/x", 3, "/"},
		{"/api/v1/x", 9, "/"},
		{"/api", 1, "/"},
		{"/api/", 1, "/"},
		{"/api/x/", 1, "/x/"},
		{"/a%2Fb/c", 1, "/c"},
	}
	for _, tt := range tests {
		if got := StripSegments(tt.path, tt.n); got != tt.want {
			t.Errorf("StripSegments(%q, %d) = %q, want %q", tt.path, tt.n, got, tt.want)
		}
	}
}
