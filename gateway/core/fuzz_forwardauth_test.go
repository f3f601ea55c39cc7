package core

import (
	"net/http"
	"net/netip"
	"net/url"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
)

// FuzzForwardAuthRead feeds arbitrary X-Forwarded-Method, -Uri and -Host
// values to a forward_auth route's reading of the original request. It
// never panics; what it accepts is an HTTP token for the method, one host,
// and the path and query Go's URL parser reads from the URI, never some
// other request.
func FuzzForwardAuthRead(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/api/items?page=2", "app.test"},
		{"POST", "/a%2Fb/%7e?x=%41", "[::1]:8443"},
		{"GE T", "http://evil.test/x", "a, b"},
		{"PATCH", "/x%zz", "app.test"},
		{"GET", "*", ""},
		{"M", "/a/../b;c?d;e", "h"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	fa := newForwardAuth(&config.ForwardAuth{From: config.FromXForwarded}, 0)
	f.Fuzz(func(t *testing.T, method, uri, host string) {
		h := http.Header{}
		h.Set(headerForwardedMethod, method)
		h.Set(headerForwardedURI, uri)
		h.Set(headerForwardedHost, host)
		r, err := newRequest("GET", "sluice.test", "/auth", h, netip.AddrPort{})
		if err != nil {
			t.Fatal(err)
		}
		var fr forwardedRequest
		if err := fa.read(r, &fr); err != nil {
			return
		}
		if fr.method != method || !isToken([]byte(method)) {
			t.Errorf("method %q read as %q", method, fr.method)
		}
		if fr.host != host || !isHost([]byte(host)) {
			t.Errorf("host %q read as %q", host, fr.host)
		}
		u, err := url.ParseRequestURI(uri)
		if err != nil || u.Host != "" || uri[0] != '/' {
			t.Fatalf("accepted URI %q that is not origin-form (%v)", uri, err)
		}
		if fr.path != u.Path || fr.query != u.RawQuery {
			t.Errorf("URI %q read as path %q query %q, Go's parser reads %q %q", uri, fr.path, fr.query, u.Path, u.RawQuery)
		}
	})
}
