package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"
)

// rawGet sends one request written as given (request target and Host
// untouched, which Go's client would clean) on a fresh connection and
// returns the status and body of the answer.
func rawGet(t *testing.T, addr, target, host string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", target, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// asUpstreamsRead is the path as a lenient upstream may read it: %2F and
// %5C decoded, the path ended at a NUL (C), "\" taken for "/", ";params"
// dropped (Tomcat, Jetty), runs of "/" merged (nginx, Spring, Tomcat) and
// dot segments resolved.
func asUpstreamsRead(escaped string) string {
	p, err := url.PathUnescape(escaped)
	if err != nil {
		p = escaped
	}
	p, _, _ = strings.Cut(p, "\x00") // an upstream written in C ends the path at a NUL
	p = strings.ReplaceAll(p, `\`, "/")
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i], _, _ = strings.Cut(s, ";")
	}
	return path.Clean("/" + strings.Join(segs, "/"))
}

// TestHostilePathsAndHosts: two routes share the prefix /api/v1, a strict one
// for /api/v1/admin/** and a loose one for the rest, both bound to a host and
// both with strip_prefix 2. Once the strict budget is spent, no spelling of a
// path or host (encoded slash or backslash in any case, empty, dot and ";"
// segments, host case, port and trailing dot) may reach the admin path
// upstream on the loose route's budget, whichever way the upstream reads the
// path it is sent. Requests go over raw TCP, since Go's client would clean
// the path first.
func TestHostilePathsAndHosts(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.EscapedPath())
	}))
	t.Cleanup(up.Close)
	p := start(t, `store: {type: memory}`+header+`
policies:
  tight: {algorithm: token_bucket, capacity: 1, rate: 0.001}
  loose: {algorithm: token_bucket, capacity: 1000, rate: 100}
routes:
  - id: admin
    match: {path: /api/v1/admin/**, host: api.example.com}
    upstream: `+up.URL+`/strict
    strip_prefix: 2
    limits: [{policy: tight, key: const:all}]
  - id: api
    match: {path: /api/v1/**, host: api.example.com}
    upstream: `+up.URL+`/loose
    strip_prefix: 2
    limits: [{policy: loose, key: ip}]
`)
	addr := hostAddr(p.base)
	const host = "api.example.com"
	if code, body := rawGet(t, addr, "/api/v1/admin/x", host); code != 200 || body != "/strict/admin/x" {
		t.Fatalf("GET /api/v1/admin/x: %d %q, want 200 /strict/admin/x", code, body)
	}
	const (
		strict  = "strict (429: its budget is spent)"
		loose   = "loose"
		refused = "refused (404)"
	)
	tests := []struct {
		name, target, host string
		want               string
	}{
		{"plain", "/api/v1/admin/x", host, strict},
		{"other path", "/api/v1/users/7", host, loose},
		{"%2F before the prefix ends", "/api%2Fv1/zzz/admin/x", host, refused},
		{"%2f lower case", "/api%2fv1/zzz/admin/x", host, refused},
		{"%2F after the prefix", "/api/v1/zzz%2F..%2Fadmin/x", host, refused},
		{"%2F joins admin", "/api/v1%2Fadmin/x", host, refused},
		{"%5C", "/api/v1%5Cadmin/x", host, refused},
		{"%5c lower case", "/api/v1/zzz%5c..%5cadmin/x", host, refused},
		{"literal backslash", `/api/v1/zzz\..\admin/x`, host, refused},
		{"// in the prefix", "/api//v1/admin/x", host, refused},
		{"// after the prefix", "/api/v1//admin/x", host, refused},
		{"leading //", "//api/v1/admin/x", host, refused},
		{"%2e%2e", "/api/v1/zzz/%2e%2e/admin/x", host, refused},
		{"%2E%2E", "/api/v1/zzz/%2E%2E/admin/x", host, refused},
		{"; params", "/api/v1/admin;v=1/x", host, refused},
		{"..;", "/api/v1/zzz/..;/admin/x", host, refused},
		{"%00 ends the path in C", "/api/v1/admin%00/x", host, refused},
		{"%00 after admin", "/api/v1/admin%00.json", host, refused},
		{"; in the prefix", "/api;/v1/admin/x", host, refused},
		{"escaped letter", "/api/v1/%61dmin/x", host, strict},
		{"path case (paths are case-sensitive)", "/api/v1/ADMIN/x", host, loose},
		{"prefix case", "/API/v1/admin/x", host, refused},
		{"trailing slash", "/api/v1/admin/", host, strict},
		{"host case", "/api/v1/admin/x", "API.Example.COM", strict},
		{"host trailing dot", "/api/v1/admin/x", "api.example.com.", strict},
		{"host port and dot", "/api/v1/admin/x", "api.example.com.:8080", strict},
		{"host two dots", "/api/v1/admin/x", "api.example.com..", refused},
		{"absolute form", "http://API.example.com./api/v1/admin/x", "other.example", strict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := rawGet(t, addr, tt.target, tt.host)
			got := "unexpected"
			switch {
			case code == 429:
				got = strict
			case code == 404 && strings.Contains(body, `"status"`):
				got = refused
			case code == 200 && strings.HasPrefix(body, "/loose/"):
				got = loose
				if read := asUpstreamsRead(strings.TrimPrefix(body, "/loose")); read == "/admin" || strings.HasPrefix(read, "/admin/") {
					t.Fatalf("GET %s (Host %s) reached %q, read as %q, on the loose route's budget", tt.target, tt.host, body, read)
				}
			}
			if got != tt.want {
				t.Errorf("GET %s (Host %s): %d %q, want %s", tt.target, tt.host, code, body, tt.want)
			}
		})
	}
}

// TestHostHeaderMatchAndKey: match.headers {Host: ...} and the
// key part header:Host read the request's host, which Go keeps out of the
// header map, normalised as match.host is: case, port and one trailing dot
// are neither another route nor a fresh budget.
func TestHostHeaderMatchAndKey(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `store: {type: memory}`+header+`
policies:
  one: {algorithm: token_bucket, capacity: 1, rate: 0.001}
routes:
  - id: tenant
    match: {path: /t/**, headers: {Host: tenant.example.com}}
    upstream: `+up.URL+`
    limits: [{policy: one, key: "header:Host"}]
  - id: other
    match: {path: /t/**}
    respond: {status: 418}
`)
	addr := hostAddr(p.base)
	for i, host := range []string{"tenant.example.com", "TENANT.example.com.", "tenant.example.com:8080"} {
		want := 429
		if i == 0 {
			want = 200
		}
		if code, body := rawGet(t, addr, "/t/x", host); code != want {
			t.Errorf("GET /t/x (Host %s): %d %q, want %d", host, code, body, want)
		}
	}
	if code, _ := rawGet(t, addr, "/t/x", "other.example.com"); code != 418 {
		t.Errorf("GET /t/x (Host other.example.com): %d, want 418 from the route without a host", code)
	}
}

// TestPathKeyNoFreshBudget: a "path" key cannot be given a fresh
// budget by spelling the same path another way; such spellings match no
// route and are answered 404 before any limit is counted.
func TestPathKeyNoFreshBudget(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `store: {type: memory}`+header+`
policies:
  one: {algorithm: token_bucket, capacity: 1, rate: 0.001}
routes:
  - id: files
    match: {path: /files/**}
    upstream: `+up.URL+`
    limits: [{policy: one, key: path}]
`)
	addr := hostAddr(p.base)
	if code, _ := rawGet(t, addr, "/files/a/b", "x"); code != 200 {
		t.Fatalf("GET /files/a/b: %d, want 200", code)
	}
	for _, target := range []string{"/files//a/b", "//files/a/b", "/files/a//b", "/files/a;x/b", "/files/a%2Fb", "/files/./a/b"} {
		if code, _ := rawGet(t, addr, target, "x"); code != 404 {
			t.Errorf("GET %s: %d, want 404 (a fresh budget for path /files/a/b otherwise)", target, code)
		}
	}
	if code, _ := rawGet(t, addr, "/files/a/b", "x"); code != 429 {
		t.Errorf("GET /files/a/b again: %d, want 429", code)
	}
}
