package gateway

import (
	"net/url"
	"testing"
)

// TestAppendRequestURIJoinsPathAndQuery: the upstream's base path and
// query are joined to the request's as httputil's ProxyRequest.SetURL
// joins them.
func TestAppendRequestURIJoinsPathAndQuery(t *testing.T) {
	for _, tt := range []struct {
		upstream, escaped, query string
		strip                    int
		want                     string
	}{
		{"http://u", "/a/b", "", 0, "/a/b"},
		{"http://u/base", "/a", "", 0, "/base/a"},
		{"http://u/base/", "/a", "", 0, "/base/a"},
		{"http://u/base", "/api/a", "", 1, "/base/a"},
		{"http://u", "/a", "x=1", 0, "/a?x=1"},
		{"http://u/b?k=v", "/a", "", 0, "/b/a?k=v"},
		{"http://u/b?k=v", "/a", "x=1", 0, "/b/a?k=v&x=1"},
	} {
		target, err := url.Parse(tt.upstream)
		if err != nil {
			t.Fatal(err)
		}
		h := &proxyHandler{c: proxyConfig{target: target, stripPrefix: tt.strip}}
		r := &publicRequest{escaped: tt.escaped, query: tt.query}
		if got := string(h.appendRequestURI([]byte("junk"), r)[4:]); got != tt.want {
			t.Errorf("%s + %s?%s (strip %d) = %q, want %q", tt.upstream, tt.escaped, tt.query, tt.strip, got, tt.want)
		}
	}
}
