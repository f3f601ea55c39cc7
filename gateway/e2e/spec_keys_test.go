package e2e

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// keyStep is one request of a key test and whether it must be admitted.
type keyStep struct {
	path   string   // path and query
	header []string // name/value pairs
	want   int      // status
}

// TestSpecKeys drives each key kind (docs/semantics.md §4) through the binary with a
// budget of 2 per key: query:NAME, path, route, const, a list key
// [header:X-A, query:b]; on_empty_key anonymous and skip; and a cost above 1.
func TestSpecKeys(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `store: {type: memory}`+header+`
policies:
  two: {algorithm: fixed_window, limit: 2, window: 24h}
  ten: {algorithm: fixed_window, limit: 10, window: 24h}
routes:
  - id: query
    match: {path: /query}
    upstream: `+up.URL+`
    limits: [{policy: two, key: "query:user"}]
  - id: path
    match: {path: /path/**}
    upstream: `+up.URL+`
    limits: [{policy: two, key: path}]
  - id: route-a
    match: {path: /route-a/**}
    upstream: `+up.URL+`
    limits: [{policy: two, key: route}]
  - id: route-b
    match: {path: /route-b/**}
    upstream: `+up.URL+`
    limits: [{policy: two, key: route}]
  - id: const
    match: {path: /const}
    upstream: `+up.URL+`
    limits: [{policy: two, key: "const:everyone"}]
  - id: list
    match: {path: /list}
    upstream: `+up.URL+`
    limits: [{policy: two, key: [header:X-A, "query:b"]}]
  - id: anonymous
    match: {path: /anonymous}
    upstream: `+up.URL+`
    limits: [{policy: two, key: header:X-User-Id, on_empty_key: anonymous}]
  - id: skip
    match: {path: /skip}
    upstream: `+up.URL+`
    limits: [{policy: two, key: header:X-User-Id, on_empty_key: skip}]
  - id: cost
    match: {path: /cost}
    upstream: `+up.URL+`
    limits: [{policy: ten, key: header:X-User-Id, cost: 3}]
`)
	ok, limited, forbidden := 200, 429, 403
	tests := []struct {
		name  string
		steps []keyStep
	}{
		{"query:NAME", []keyStep{
			{"/query?user=a", nil, ok}, {"/query?user=a&other=1", nil, ok}, {"/query?user=a", nil, limited},
			{"/query?user=b", nil, ok}, {"/query?user=A", nil, ok}, // byte for byte: A is not a
			{"/query", nil, forbidden}, {"/query?user=", nil, forbidden}, {"/query?user=%20%20", nil, forbidden},
		}},
		{"path", []keyStep{
			{"/path/x", nil, ok}, {"/path/x?q=1", nil, ok}, {"/path/x?q=2", nil, limited}, // the query is not the path
			{"/path/y", nil, ok}, {"/path/x/", nil, ok}, // another path, another key
		}},
		{"route: one budget per route", []keyStep{
			{"/route-a/1", []string{"X-User-Id", "u1"}, ok}, {"/route-a/2", []string{"X-User-Id", "u2"}, ok},
			{"/route-a/3", nil, limited},
			{"/route-b/1", nil, ok}, {"/route-b/2", nil, ok}, {"/route-b/3", nil, limited},
		}},
		{"const", []keyStep{
			{"/const", []string{"X-User-Id", "u1"}, ok}, {"/const?user=2", nil, ok}, {"/const", []string{"X-A", "z"}, limited},
		}},
		{"list [header:X-A, query:b]", []keyStep{
			{"/list?b=1", []string{"X-A", "a"}, ok}, {"/list?b=1", []string{"X-A", "a"}, ok}, {"/list?b=1", []string{"X-A", "a"}, limited},
			{"/list?b=2", []string{"X-A", "a"}, ok}, {"/list?b=1", []string{"X-A", "b"}, ok},
			// Parts that would concatenate alike are still two keys.
			{"/list?b=" + url.QueryEscape("a:1"), []string{"X-A", "a"}, ok}, {"/list?b=1", []string{"X-A", "a:a"}, ok},
			{"/list?b=1", nil, forbidden}, {"/list", []string{"X-A", "a"}, forbidden}, // an empty part empties the key
		}},
		{"on_empty_key anonymous", []keyStep{
			{"/anonymous", nil, ok}, {"/anonymous", []string{"X-User-Id", "   "}, ok}, {"/anonymous", nil, limited},
			// No real value reaches the anonymous budget.
			{"/anonymous", []string{"X-User-Id", "-"}, ok}, {"/anonymous", []string{"X-User-Id", "anonymous"}, ok},
			{"/anonymous", []string{"X-User-Id", "_"}, ok}, {"/anonymous", []string{"X-User-Id", `""`}, ok},
			{"/anonymous", []string{"X-User-Id", "%00"}, ok}, {"/anonymous", []string{"X-User-Id", "null"}, ok},
			{"/anonymous", nil, limited},
		}},
		{"on_empty_key skip", []keyStep{
			{"/skip", nil, ok}, {"/skip", nil, ok}, {"/skip", nil, ok}, {"/skip", []string{"X-User-Id", " "}, ok},
			{"/skip", []string{"X-User-Id", "s"}, ok}, {"/skip", []string{"X-User-Id", "s"}, ok}, {"/skip", []string{"X-User-Id", "s"}, limited},
			{"/skip", nil, ok},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, s := range tt.steps {
				r := get(t, p.base+s.path, s.header...)
				if r.code != s.want {
					t.Errorf("step %d: GET %s %q = %d %s, want %d", i+1, s.path, s.header, r.code, trunc(r.body), s.want)
				}
				switch {
				case s.want == limited && r.code == limited:
					check429(t, r, "two")
				case s.want == forbidden && r.code == forbidden:
					checkProblem(t, r, forbidden)
				}
			}
		})
	}
	t.Run("skip shows no limit", func(t *testing.T) {
		r := get(t, p.base+"/skip")
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit", "RateLimit-Policy"} {
			if v := r.header.Get(h); v != "" {
				t.Errorf("a request whose only limit was skipped carries %s: %q", h, v)
			}
		}
	})
	t.Run("anonymous budget is reported", func(t *testing.T) {
		r := get(t, p.base+"/anonymous")
		if r.code != limited || r.header.Get("X-RateLimit-Limit") != "2" || r.header.Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("anonymous request after the shared budget is spent: %d, limit %q, remaining %q; want 429, 2, 0",
				r.code, r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"))
		}
	})
	t.Run("cost 3 of 10", func(t *testing.T) {
		for i, want := range []string{"7", "4", "1"} {
			r := get(t, p.base+"/cost", "X-User-Id", "spender")
			if r.code != ok || r.header.Get("X-RateLimit-Remaining") != want {
				t.Errorf("request %d of cost 3: %d, remaining %q; want 200, %s", i+1, r.code, r.header.Get("X-RateLimit-Remaining"), want)
			}
			if got, wantRL := r.header.Get("RateLimit"), fmt.Sprintf(`"ten";r=%s;t=0`, want); got != wantRL {
				t.Errorf("request %d: RateLimit = %q, want %q", i+1, got, wantRL)
			}
		}
		// 1 left, cost 3: denied, and the denial consumes nothing.
		for range 2 {
			r := get(t, p.base+"/cost", "X-User-Id", "spender")
			check429(t, r, "ten")
			if got := r.header.Get("X-RateLimit-Remaining"); got != "1" {
				t.Errorf("denied cost-3 request: remaining %q, want 1", got)
			}
		}
		if r := get(t, p.base+"/cost", "X-User-Id", "other"); r.header.Get("X-RateLimit-Remaining") != "7" {
			t.Errorf("another key: remaining %q, want 7", r.header.Get("X-RateLimit-Remaining"))
		}
	})
	if !strings.Contains(get(t, p.admin+"/metrics").body, `sluice_decisions_total{policy="ten",result="denied",route="cost"} 2`) {
		t.Error("the cost route's two denials are not counted")
	}
}
