package fastengine

import (
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/metrics"
)

// uriWire is a request's wire with no header and no peer.
type uriWire struct{}

func (uriWire) Peek(string) []byte      { return nil }
func (uriWire) PeekAll(string) [][]byte { return nil }
func (uriWire) RemoteAddr() string      { return "" }

// uriTable returns a table whose one route, without limits, forwards every
// path the path rules admit.
func uriTable(t testing.TB) *core.Table {
	t.Helper()
	m, err := metrics.New(metrics.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Routes: []config.Route{{ID: "all", Match: config.Match{Path: "/**"}, Upstream: "http://upstream.test"}}}
	config.ApplyDefaults(cfg)
	tab, err := core.New(cfg, core.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// decideTarget decides a GET of target on tab as the engine does, and
// returns the exchange, its request parsed, and the Outcome.
func decideTarget(tab *core.Table, target string) (*core.Exchange, core.Outcome) {
	x := new(core.Exchange)
	x.Req.Reset(uriWire{}, "GET", []byte("gw.test"), []byte(target), netip.AddrPort{})
	return x, tab.Decide(x)
}

// TestAppendRequestURIJoinsPathAndQuery: the upstream's base path and
// query are joined to the request's as httputil's ProxyRequest.SetURL
// joins them.
func TestAppendRequestURIJoinsPathAndQuery(t *testing.T) {
	tab := uriTable(t)
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
		reqTarget := tt.escaped
		if tt.query != "" {
			reqTarget += "?" + tt.query
		}
		x, out := decideTarget(tab, reqTarget)
		r := &x.Req
		if !out.Forward || r.EscapedPath() != tt.escaped || r.RawQuery() != tt.query {
			t.Fatalf("GET %s: forward %v, escaped path %q, query %q; want it forwarded as %q ? %q", reqTarget, out.Forward, r.EscapedPath(), r.RawQuery(), tt.escaped, tt.query)
		}
		if got := string(h.appendRequestURI([]byte("junk"), r, h.c.target)[4:]); got != tt.want {
			t.Errorf("%s + %s?%s (strip %d) = %q, want %q", tt.upstream, tt.escaped, tt.query, tt.strip, got, tt.want)
		}
	}
}

// oddSegments reports whether a decoded path split on "/" and "\" has a
// "." or ".." segment or an empty one other than the last.
func oddSegments(decoded string) bool {
	segs := regexp.MustCompile(`[/\\]`).Split(decoded, -1)
	for i, s := range segs {
		if s == "." || s == ".." || s == "" && i > 0 && i < len(segs)-1 {
			return true
		}
	}
	return false
}

// FuzzForwardedPath checks the target a proxy route sends upstream for any
// request-target the core forwards: it is the upstream's base path joined,
// one slash between, to the escaped path less strip_prefix segments, then
// the request's query; and its path holds no dot or empty segment and stays below the
// upstream's base path even once resolved.
func FuzzForwardedPath(f *testing.F) {
	for _, s := range []struct {
		target string
		strip  uint8
	}{
		{"/api/v1/users", 1}, {"/users//posts", 0}, {"/a/b/c/z", 2}, {"/", 9},
		{"/api/%2e%2e/%2e%2e/admin", 1}, {"//evil.test/x", 0}, {"/a/x/b/y/z", 3},
		{"/api/a%2Fb", 1}, {"/a.b/(c)/[d]", 0}, {"/a/b", 7}, {"/x/", 1},
		{"/%C3%BC/%E2%82%AC", 1}, {"/a/b?x=1&y=%20", 1}, {"/a%3Fb/c?q", 1}, {"*", 0},
	} {
		f.Add(s.target, s.strip)
	}
	tab := uriTable(f)
	const base = "/base"
	upstream := &url.URL{Scheme: "http", Host: "upstream.test", Path: base}
	f.Fuzz(func(t *testing.T, target string, strip uint8) {
		x, out := decideTarget(tab, target)
		if !out.Forward {
			return // answered 400 or 404 by the core
		}
		n := int(strip % 8)
		h := &proxyHandler{c: proxyConfig{route: "fuzz", target: upstream, stripPrefix: n}}
		sent := string(h.appendRequestURI(nil, &x.Req, h.c.target))
		raw, query, hasQuery := strings.Cut(sent, "?")
		if want := base + "/" + strings.TrimPrefix(core.StripSegments(x.Req.EscapedPath(), n), "/"); raw != want {
			t.Fatalf("%q with strip_prefix %d: path sent %q, want %q", target, n, raw, want)
		}
		if query != x.Req.RawQuery() || hasQuery != (x.Req.RawQuery() != "") {
			t.Fatalf("%q: query sent %q (present %v), want %q", target, query, hasQuery, x.Req.RawQuery())
		}
		fwd, err := url.PathUnescape(raw)
		if err != nil {
			t.Fatalf("%q: the proxy sent %q, not an escaped path: %v", target, raw, err)
		}
		if fwd != base && !strings.HasPrefix(fwd, base+"/") {
			t.Fatalf("%q with strip_prefix %d forwarded as %q, outside the upstream base %q", target, n, fwd, base)
		}
		if oddSegments(fwd) || !strings.HasPrefix(path.Clean(fwd), base) {
			t.Fatalf("%q with strip_prefix %d forwarded as %q: escapes base %q", target, n, fwd, base)
		}
	})
}
