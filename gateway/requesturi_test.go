package gateway

import (
	"net/url"
	"strings"
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

// TestSplitTargetFragment: a raw "#" anywhere in a target is errFragment;
// an escaped "%23" is a path byte.
func TestSplitTargetFragment(t *testing.T) {
	for _, target := range []string{"/login#1", "/login#", "#", "/a?x=1#y", "/a%2Fb#c", "http://h/a#b"} {
		if _, _, _, _, err := splitTarget(target); err != errFragment {
			t.Errorf("splitTarget(%q) error = %v, want errFragment", target, err)
		}
	}
	escaped, path, _, _, err := splitTarget("/tags/c%23")
	if err != nil || escaped != "/tags/c%23" || path != "/tags/c#" {
		t.Errorf(`splitTarget("/tags/c%%23") = %q, %q, %v; want the escape kept and "#" decoded`, escaped, path, err)
	}
	if d := targetDetail(errFragment); !strings.Contains(d, `request-target holds a raw "#"`) {
		t.Errorf("the detail %q does not name the request-target", d)
	}
}
