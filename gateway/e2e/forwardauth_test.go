package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// forwardAuthConfig is the sluice side of the proxy tests: one
// forward_auth route per proxy, each limiting 3 requests per user and
// original path (the recipes of docs/forward-auth.md), and for nginx an
// exact-path route before it that limits POST /login to 3 per user.
const forwardAuthConfig = `
server:
  listen: "127.0.0.1:0"
  trusted_proxies: ["127.0.0.1"]
admin: {listen: "127.0.0.1:0"}
policies:
  three: {algorithm: fixed_window, limit: 3, window: 1h}
routes:
  - id: caddy
    match: {path: /auth/caddy}
    forward_auth: {from: x-forwarded}
    limits: [{policy: three, key: [header:X-User-Id, path]}]
  - id: nginx-login
    match: {path: /auth/nginx}
    forward_auth: {from: x-original, deny_status: 403, match: {path: /login, methods: [POST]}}
    limits: [{policy: three, key: header:X-User-Id}]
  - id: nginx
    match: {path: /auth/nginx}
    forward_auth: {from: x-original, deny_status: 403}
    limits: [{policy: three, key: [header:X-User-Id, path]}]
`

// upstreamLog is an upstream that records, per original path, the
// X-RateLimit-Remaining value of each request it sees.
type upstreamLog struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (u *upstreamLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen[r.URL.Path] = append(u.seen[r.URL.Path], r.Header.Get("X-Ratelimit-Remaining"))
	u.mu.Unlock()
	fmt.Fprintln(w, "from the upstream")
}

func (u *upstreamLog) remaining(path string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen[path]...)
}

// startProxy runs a proxy with args and waits until addr accepts
// connections; the proxy is stopped by its PID at the end of the test.
func startProxy(t *testing.T, bin string, args []string, env []string, addr string) {
	t.Helper()
	p, err := sluicetest.StartProgram(bin, sluicetest.Options{Args: args, Env: env, MaxLog: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), p.Logs())
		}
	})
	waitUntil(t, 15*time.Second, filepath.Base(bin)+" listening on "+addr, func() bool {
		select {
		case <-p.Exited():
			t.Fatalf("%s exited with %d before listening:\n%s", bin, p.ExitCode(), p.Logs())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// checkForwardAuth drives a proxy at base that asks sluice about every
// request: alice's three requests reach the upstream with the quota
// header, her 4th gets a 429 with Retry-After and the quota headers and
// never reaches the upstream, a header she sends to describe another path
// changes nothing, and bob's budget is his own. clientHeaders says whether
// the proxy copies the quota headers onto admitted answers.
func checkForwardAuth(t *testing.T, p *proc, up *upstreamLog, base, route string, clientHeaders bool) {
	t.Helper()
	for i, want := range []string{"2", "1", "0"} {
		r := get(t, base+"/api/orders", "X-User-Id", "alice")
		if r.code != 200 || r.body != "from the upstream\n" {
			t.Fatalf("alice's request %d = %d %q, want 200 from the upstream", i+1, r.code, r.body)
		}
		if got := r.header.Get("X-Ratelimit-Remaining"); clientHeaders && got != want {
			t.Errorf("alice's request %d: client sees X-RateLimit-Remaining %q, want %s", i+1, got, want)
		}
	}
	if got := up.remaining("/api/orders"); strings.Join(got, ",") != "2,1,0" {
		t.Errorf("the upstream saw X-RateLimit-Remaining %v, want [2 1 0]", got)
	}
	for _, spoof := range [][]string{
		nil,
		{"X-Forwarded-Uri", "/api/other", "X-Original-URI", "/api/other", "X-Forwarded-Method", "OPTIONS", "X-Original-Method", "OPTIONS"},
	} {
		r := get(t, base+"/api/orders", append([]string{"X-User-Id", "alice"}, spoof...)...)
		h := r.header
		if r.code != 429 || h.Get("Retry-After") == "" || h.Get("X-Ratelimit-Remaining") != "0" ||
			h.Get("X-Ratelimit-Limit") != "3" || h.Get("Ratelimit-Policy") != `"three";q=3;w=3600` || h.Get("Ratelimit") == "" {
			t.Errorf("alice's request with %v = %d %v %q, want 429 with Retry-After and the quota headers", spoof, r.code, h, r.body)
		}
		if !strings.Contains(r.body, `"status":429`) {
			t.Errorf("the 429's body %q is not the problem+json body", r.body)
		}
	}
	if n := len(up.remaining("/api/orders")); n != 3 {
		t.Errorf("the upstream saw %d requests for /api/orders, want 3: a denied request reached it", n)
	}
	if r := get(t, base+"/api/orders", "X-User-Id", "bob"); r.code != 200 {
		t.Errorf("bob's first request = %d, want 200 (his own budget)", r.code)
	}
	for _, sample := range []string{
		`sluice_decisions_total{policy="three",result="allowed",route="` + route + `"} 4`,
		`sluice_decisions_total{policy="three",result="denied",route="` + route + `"} 2`,
	} {
		name, want, _ := strings.Cut(sample, "} ")
		if got := p.metric(name + "}"); got != want {
			t.Errorf("%s = %q, want %s", name+"}", got, want)
		}
	}
}

// TestForwardAuthNginx puts nginx's auth_request in front of an upstream,
// asking sluice's forward_auth route with the mapping of
// docs/forward-auth.md: sluice answers 403 for a rate-limited request,
// nginx's error_page turns it into the 429 with Retry-After and the quota
// headers it copied with auth_request_set.
func TestForwardAuthNginx(t *testing.T) {
	t.Parallel()
	bin := sluicetest.RequireProgram(t, "nginx-light", "nginx")
	up := &upstreamLog{seen: map[string][]string{}}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	p := start(t, forwardAuthConfig)
	dir := t.TempDir()
	addr := "127.0.0.1:" + freePort(t)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxForwardAuthConfig(dir, addr, hostAddr(p.base), hostAddr(upSrv.URL))), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf}
	if out, err := exec.Command(bin, append(args, "-t")...).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	startProxy(t, bin, args, nil, addr)
	checkForwardAuth(t, p, up, "http://"+addr, "nginx", true)
	// A request without a user: sluice's 403 stays a 403 (no Retry-After).
	if r := get(t, "http://"+addr+"/api/orders"); r.code != 403 || r.header.Get("Retry-After") != "" {
		t.Errorf("a request without X-User-Id = %d %v, want 403 without Retry-After", r.code, r.header)
	}
	checkNginxFragment(t, up, addr)
}

// checkNginxFragment: once POST /login is refused, "POST /login#1" must
// not reach the upstream. nginx passes the raw "#" on in $request_uri
// (X-Original-URI) and to the upstream, which may end the path at it and
// serve /login; sluice answers the auth request 400, which nginx turns
// into a 500.
func checkNginxFragment(t *testing.T, up *upstreamLog, addr string) {
	t.Helper()
	logins := func() int {
		n := 0
		up.mu.Lock()
		defer up.mu.Unlock()
		for path, seen := range up.seen {
			if strings.HasPrefix(path, "/login") {
				n += len(seen)
			}
		}
		return n
	}
	post := func(target string) int {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: app.test\r\nX-User-Id: carol\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", target)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("POST %s: %v", target, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 3 {
		if code := post("/login"); code != 200 {
			t.Fatalf("carol's POST /login %d = %d, want 200", i+1, code)
		}
	}
	if code := post("/login"); code != 429 {
		t.Fatalf("carol's 4th POST /login = %d, want 429", code)
	}
	for _, target := range []string{"/login#1", "/login#2", "/login?x#y"} {
		if code := post(target); code < 400 {
			t.Errorf("carol's POST %s after /login was refused = %d, want it refused", target, code)
		}
	}
	if n := logins(); n != 3 {
		t.Errorf("the upstream saw %d POST /login requests, want 3: a \"#\" took one past the limit", n)
	}
}

// nginxForwardAuthConfig is docs/forward-auth.md's nginx recipe on addr,
// asking sluice at sluiceAddr and proxying to upstream, with every path
// nginx writes under dir. One process (master_process off), so stopping
// its PID stops it all.
func nginxForwardAuthConfig(dir, addr, sluiceAddr, upstream string) string {
	return fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server {
        listen %[2]s;
        location / {
            auth_request /_sluice;
            auth_request_set $rl_limit $upstream_http_x_ratelimit_limit;
            auth_request_set $rl_remaining $upstream_http_x_ratelimit_remaining;
            auth_request_set $rl_reset $upstream_http_x_ratelimit_reset;
            auth_request_set $rl $upstream_http_ratelimit;
            auth_request_set $rl_policy $upstream_http_ratelimit_policy;
            auth_request_set $rl_retry $upstream_http_retry_after;
            error_page 403 = @sluice_denied;
            add_header X-RateLimit-Limit $rl_limit;
            add_header X-RateLimit-Remaining $rl_remaining;
            add_header X-RateLimit-Reset $rl_reset;
            add_header RateLimit $rl;
            add_header RateLimit-Policy $rl_policy;
            proxy_set_header X-RateLimit-Remaining $rl_remaining;
            proxy_pass http://%[4]s;
        }
        location = /_sluice {
            internal;
            proxy_pass http://%[3]s/auth/nginx;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-Method $request_method;
            proxy_set_header X-Original-URI $request_uri;
            proxy_set_header X-Forwarded-Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }
        location @sluice_denied {
            if ($rl_retry = "") {
                return 403;
            }
            add_header Retry-After $rl_retry always;
            add_header X-RateLimit-Limit $rl_limit always;
            add_header X-RateLimit-Remaining $rl_remaining always;
            add_header X-RateLimit-Reset $rl_reset always;
            add_header RateLimit $rl always;
            add_header RateLimit-Policy $rl_policy always;
            default_type application/problem+json;
            return 429 '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded. Please retry after $rl_retry seconds."}';
        }
    }
}
`, dir, addr, sluiceAddr, upstream)
}

// TestForwardAuthCaddy puts Caddy's forward_auth in front of an upstream:
// Caddy passes sluice's 429 (status, headers, body) to the client as it
// is, and copies the quota headers of an admission onto the request to
// the upstream (copy_headers).
func TestForwardAuthCaddy(t *testing.T) {
	t.Parallel()
	bin := sluicetest.RequireProgram(t, "caddy", "caddy")
	up := &upstreamLog{seen: map[string][]string{}}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	p := start(t, forwardAuthConfig)
	dir := t.TempDir()
	addr := "127.0.0.1:" + freePort(t)
	conf := filepath.Join(dir, "Caddyfile")
	caddyfile := fmt.Sprintf(`{
	admin off
	auto_https off
}
http://%s {
	forward_auth %s {
		uri /auth/caddy
		copy_headers X-RateLimit-Limit X-RateLimit-Remaining X-RateLimit-Reset RateLimit RateLimit-Policy
	}
	reverse_proxy %s
}
`, addr, hostAddr(p.base), hostAddr(upSrv.URL))
	if err := os.WriteFile(conf, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	// Caddy keeps its state under HOME and the XDG directories: all in dir.
	env := []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	startProxy(t, bin, []string{"run", "--config", conf, "--adapter", "caddyfile"}, env, addr)
	checkForwardAuth(t, p, up, "http://"+addr, "caddy", false)
}
