package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// importSCG writes application.yml, runs `sluice import scg` on it with
// extra flags, checks the exit status, and returns the translated config
// with its admin listener on a free port.
func importSCG(t *testing.T, scg string, wantCode int, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "application.yml"), []byte(scg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runSluice(t, dir, append(append([]string{"import", "scg"}, flags...), "application.yml")...)
	if code != wantCode {
		t.Fatalf("sluice import scg exited %d, want %d; stderr:\n%s", code, wantCode, errOut)
	}
	return out + "admin:\n  listen: \"127.0.0.1:0\"\n"
}

// redisSecond returns Redis TIME's seconds, the clock SCG and compat scg count in.
func redisSecond(t *testing.T, c *redistest.Conn) int64 {
	t.Helper()
	v, err := c.Do("TIME")
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		t.Fatalf("TIME: %v", v)
	}
	s, err := strconv.ParseInt(arr[0].(string), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestImportSCGPerUserLoadTest redoes a per-user SCG limiter's load test
// (docs/migrating-from-scg.md, worked migration) on its configuration, translated by `sluice import scg`: one client
// requesting /demo?userId=test as fast as it can for 10 s against
// replenishRate 1, burstCapacity 1, where SCG admitted 11. With whole
// seconds a request is admitted exactly when it is the first of its
// second, so the admissions are checked against the seconds of Redis TIME
// read around each request: at least the seconds certainly holding a
// request, at most those that may; over the 11 seconds S..S+10 the count is
// 11 on a machine that keeps up. The translated config's SCG headers and
// SCG's Redis keys are checked too.
func TestImportSCGPerUserLoadTest(t *testing.T) {
	redistest.Check(t, standaloneErr)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "demo "+r.URL.Path)
	}))
	defer upstream.Close()
	host, port, _ := strings.Cut(standalone.Addr(), ":")
	scg := fmt.Sprintf(`server:
  address: 127.0.0.1
  port: 0
spring:
  data:
    redis:
      host: %s
      port: %s
  cloud:
    gateway:
      routes:
      - id: rate_limiter_route
        uri: %s
        predicates:
        - Path=/demo/**
        filters:
        - name: RequestRateLimiter
          args:
            key-resolver: "#{@userKeyResolver}"
            redis-rate-limiter.replenishRate: 1
            redis-rate-limiter.burstCapacity: 1
            redis-rate-limiter.requestedTokens: 1
`, host, port, upstream.URL)
	p := start(t, importSCG(t, scg, 0, "--key-resolver", "userKeyResolver=query:userId"))
	rc, err := redistest.Dial(context.Background(), standalone.Addr(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	user := fmt.Sprintf("test-%d", time.Now().UnixNano())
	url := p.base + "/demo?userId=" + user

	// deny-empty-key: no userId, 403 and no budget used.
	if r := get(t, p.base+"/demo"); r.code != http.StatusForbidden {
		t.Fatalf("no userId: %d, want 403", r.code)
	}
	// Start at a fresh second S.
	s0 := redisSecond(t, rc)
	for redisSecond(t, rc) == s0 {
		time.Sleep(5 * time.Millisecond) // polling Redis' clock, under a second
	}
	start := s0 + 1
	certain, possible := map[int64]bool{}, map[int64]bool{}
	admitted, denied := 0, 0
	for {
		before := redisSecond(t, rc)
		if before > start+10 {
			break
		}
		r := get(t, url)
		after := redisSecond(t, rc)
		switch r.code {
		case http.StatusOK:
			admitted++
			if admitted == 1 {
				for name, want := range map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Replenish-Rate": "1",
					"X-Ratelimit-Burst-Capacity": "1", "X-Ratelimit-Requested-Tokens": "1"} {
					if got := r.header.Get(name); got != want {
						t.Errorf("%s: %q, want %q", name, got, want)
					}
				}
			}
		case http.StatusTooManyRequests:
			denied++
		default:
			t.Fatalf("status %d: %s", r.code, r.body)
		}
		if before == after {
			certain[before] = true
		}
		for s := before; s <= after; s++ {
			possible[s] = true
		}
	}
	t.Logf("10 s at 1/s, burst 1: %d admitted, %d denied (SCG: 11 admitted); seconds %d certain, %d possible",
		admitted, denied, len(certain), len(possible))
	if admitted < len(certain) || admitted > len(possible) {
		t.Fatalf("admitted %d, want between %d and %d (one per second with a request)", admitted, len(certain), len(possible))
	}
	if len(certain) >= 11 && len(possible) == 11 && admitted != 11 {
		t.Fatalf("admitted %d over 11 whole seconds, want 11", admitted)
	}
	// SCG's keys (4.2.0 and later: the route id in the key), without
	// sluice's prefix, with SCG's TTL floor(2·1/1) = 2 s.
	for _, suffix := range []string{".tokens", ".timestamp"} {
		key := "request_rate_limiter.{rate_limiter_route." + user + "}" + suffix
		ttl, err := rc.Do("TTL", key)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := ttl.(int64); n < 1 || n > 2 {
			t.Errorf("TTL %s = %v, want 1..2", key, ttl)
		}
	}
}

// TestImportSCGRoutes translates routes written in both of SCG's forms and
// sends requests SCG would route (and some it would not): each reaches the
// upstream SCG would pick, with the path SCG would forward.
func TestImportSCGRoutes(t *testing.T) {
	redistest.Check(t, standaloneErr)
	var mu sync.Mutex
	seen := map[string]string{}
	upstream := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = r.URL.Path
			mu.Unlock()
			fmt.Fprint(w, name+" "+r.URL.Path)
		}))
		t.Cleanup(s.Close)
		return s
	}
	orders, users, legacy := upstream("orders"), upstream("users"), upstream("legacy")
	host, port, _ := strings.Cut(standalone.Addr(), ":")
	scg := fmt.Sprintf(`server:
  address: 127.0.0.1
  port: 0
spring:
  data:
    redis:
      host: %[1]s
      port: %[2]s
  cloud:
    gateway:
      routes:
      - id: orders
        uri: %[3]s
        predicates:
        - Path=/api/orders/**,/api/carts/{id}
        - Method=GET,POST
        - Host=shop.example.com
        - Header=X-Tenant, acme
        filters:
        - StripPrefix=1
      - id: search
        uri: %[3]s
        predicates:
        - Path=/search
        - Query=q
        - Query=lang, en
      server:
        webflux:
          routes:
          - id: users
            uri: %[4]s
            predicates:
            - name: Path
              args:
                patterns: [/users/**]
            filters:
            - name: StripPrefix
              args:
                parts: 1
            - name: PrefixPath
              args:
                prefix: /internal
            - name: RequestRateLimiter
              args:
                key-resolver: "#{@userKeyResolver}"
                redis-rate-limiter.replenishRate: 1
                redis-rate-limiter.burstCapacity: 2
                redis-rate-limiter.requestedTokens: 2
                deny-empty-key: false
          - id: legacy
            uri: %[5]s
            predicates:
            - Path=/legacy/**
            filters:
            - RewritePath=/legacy/?(?<segment>.*), /v1/$\{segment}
`, host, port, orders.URL, users.URL, legacy.URL)
	p := start(t, importSCG(t, scg, 0, "--key-resolver", "userKeyResolver=header:X-User-Id"))
	send := func(method, path string, header ...string) response {
		req, err := http.NewRequest(method, p.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
				continue
			}
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		return response{code: resp.StatusCode, header: resp.Header}
	}
	shop := []string{"Host", "shop.example.com", "X-Tenant", "acme"}
	user := fmt.Sprintf("u-%d", time.Now().UnixNano())
	for _, tc := range []struct {
		method, path string
		header       []string
		code         int
		upstream     string // "" when no upstream is reached
		forwarded    string
	}{
		{"GET", "/api/orders/7", shop, 200, "orders", "/orders/7"},
		{"POST", "/api/carts/42", shop, 200, "orders", "/carts/42"},
		{"DELETE", "/api/orders/7", shop, 404, "", ""},
		{"GET", "/api/orders/7", []string{"Host", "other.example.com", "X-Tenant", "acme"}, 404, "", ""},
		{"GET", "/api/orders/7", []string{"Host", "shop.example.com", "X-Tenant", "other"}, 404, "", ""},
		{"GET", "/api/carts/42/items", shop, 404, "", ""},
		{"GET", "/users/me", []string{"X-User-Id", user}, 200, "users", "/internal/me"},
		{"GET", "/users/me", nil, 200, "users", "/internal/me"}, // deny-empty-key false: not limited
		{"GET", "/legacy/a/b", nil, 200, "legacy", "/v1/a/b"},
		{"GET", "/nowhere", nil, 404, "", ""},
		{"GET", "/search?q=x&lang=fr&lang=en", nil, 200, "orders", "/search"},
		{"GET", "/search?q&lang=en", nil, 200, "orders", "/search"},
		{"GET", "/search?lang=en", nil, 404, "", ""},
		{"GET", "/search?q=x&lang=de", nil, 404, "", ""},
	} {
		mu.Lock()
		clear(seen)
		mu.Unlock()
		r := send(tc.method, tc.path, tc.header...)
		mu.Lock()
		got := seen[tc.upstream]
		n := len(seen)
		mu.Unlock()
		if r.code != tc.code || tc.upstream != "" && got != tc.forwarded || tc.upstream == "" && n != 0 {
			t.Errorf("%s %s %v: %d, upstreams %v; want %d at %s %q", tc.method, tc.path, tc.header, r.code, seen, tc.code, tc.upstream, tc.forwarded)
		}
	}
	// The users route: burst 2, 2 tokens a request, 1 token a second: the
	// admitted request above left none, and the next finds 2 only after
	// two whole-second ticks, so it is denied, with SCG's headers.
	r := send("GET", "/users/me", "X-User-Id", user)
	if r.code != http.StatusTooManyRequests {
		t.Errorf("second request of cost 2 on burst 3: %d, want 429", r.code)
	}
	for name, want := range map[string]string{"X-Ratelimit-Replenish-Rate": "1", "X-Ratelimit-Burst-Capacity": "2", "X-Ratelimit-Requested-Tokens": "2"} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestImportSCGFailOpen checks SCG's answer while Redis is down as the
// translation keeps it (on_error allow): the request goes through with
// X-RateLimit-Remaining: -1.
func TestImportSCGFailOpen(t *testing.T) {
	srv, err := redistest.StartServer(redistest.ServerOptions{})
	redistest.Check(t, err)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer upstream.Close()
	host, port, _ := strings.Cut(srv.Addr(), ":")
	scg := fmt.Sprintf(`server: {address: 127.0.0.1, port: 0}
spring:
  data: {redis: {host: %s, port: %s}}
  cloud:
    gateway:
      routes:
      - id: api
        uri: %s
        predicates: [Path=/api/**]
        filters:
        - name: RequestRateLimiter
          args:
            key-resolver: "#{@ipKeyResolver}"
            redis-rate-limiter.replenishRate: 5
            redis-rate-limiter.burstCapacity: 10
`, host, port, upstream.URL)
	p := start(t, importSCG(t, scg, 0))
	if r := get(t, p.base+"/api/x"); r.code != 200 || r.header.Get("X-Ratelimit-Remaining") != "9" {
		t.Fatalf("Redis up: %d, remaining %q; want 200 and 9", r.code, r.header.Get("X-Ratelimit-Remaining"))
	}
	srv.Close()
	r := get(t, p.base+"/api/x")
	if r.code != 200 || r.header.Get("X-Ratelimit-Remaining") != "-1" || r.header.Get("X-Ratelimit-Burst-Capacity") != "10" {
		t.Fatalf("Redis down: %d, headers %v; want 200 with X-RateLimit-Remaining -1", r.code, r.header)
	}
}

// TestExampleSCGMigration runs examples/scg-migration.yaml on a real Redis:
// demo1234 has a bucket of 10, any other user one of 1, a request without
// userId is refused; and budgets are SCG's: tokens an SCG instance took
// (written to its keys as SCG writes them) are missing for sluice.
func TestExampleSCGMigration(t *testing.T) {
	redistest.Check(t, standaloneErr)
	raw, err := os.ReadFile("../../examples/scg-migration.yaml")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	yaml := strings.NewReplacer("127.0.0.1:8080", "127.0.0.1:0", "127.0.0.1:9090", "127.0.0.1:0",
		"http://127.0.0.1:3000", up.URL, "127.0.0.1:6379", standalone.Addr()).Replace(string(raw))
	p := start(t, yaml)
	rc, err := redistest.Dial(context.Background(), standalone.Addr(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// Fresh user names: the keys are SCG's, the same for every run.
	run := time.Now().UnixNano()
	if r := get(t, p.base+"/demo"); r.code != http.StatusForbidden {
		t.Errorf("no userId: %d, want 403", r.code)
	}
	// demo1234's override: 10 at once. Its key is the real value, so clear it first.
	if _, err := rc.Do("DEL", "request_rate_limiter.{rate_limiter_route.demo1234}.tokens", "request_rate_limiter.{rate_limiter_route.demo1234}.timestamp"); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 10 {
		if r := get(t, p.base+"/demo?userId=demo1234"); r.code == 200 {
			admitted++
		}
	}
	if admitted < 10 {
		t.Errorf("demo1234: %d of 10 admitted at once, want 10", admitted)
	}
	user := fmt.Sprintf("test-%d", run)
	if r := get(t, p.base+"/demo?userId="+user); r.code != 200 || r.header.Get("X-Ratelimit-Burst-Capacity") != "1" {
		t.Errorf("first request of %s: %d, burst %q; want 200 and 1", user, r.code, r.header.Get("X-Ratelimit-Burst-Capacity"))
	}
	// An SCG instance emptied another user's bucket this second: sluice
	// finds it empty, unless a second went by (then 1 token came back).
	other := fmt.Sprintf("scg-%d", run)
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Fatal("every attempt straddled a second of Redis TIME")
		}
		sec := redisSecond(t, rc)
		for _, kv := range [][2]string{{".tokens", "0"}, {".timestamp", strconv.FormatInt(sec, 10)}} {
			if _, err := rc.Do("SETEX", "request_rate_limiter.{rate_limiter_route."+other+"}"+kv[0], "2", kv[1]); err != nil {
				t.Fatal(err)
			}
		}
		r := get(t, p.base+"/demo?userId="+other)
		if redisSecond(t, rc) != sec {
			continue // a second went by: the test cannot tell; try again
		}
		if r.code != http.StatusTooManyRequests || r.header.Get("X-Ratelimit-Remaining") != "0" {
			t.Errorf("after SCG took the token: %d, remaining %q; want 429 and 0", r.code, r.header.Get("X-Ratelimit-Remaining"))
		}
		break
	}
}

// scgModel is Spring Cloud Gateway's RedisRateLimiter decision for one key,
// computed in Go from the whole second of each call (docs/migrating-from-scg.md):
// rate tokens per elapsed second up to burst, a missing bucket full, a
// request admitted when its tokens are there, and only then charged.
type scgModel struct {
	rate, burst, cost int64
	tokens, stamp     int64
	set               bool
}

func (m *scgModel) allow(sec int64) bool {
	tokens, stamp := m.burst, int64(0)
	if m.set {
		tokens, stamp = m.tokens, m.stamp
	}
	filled := min(m.burst, tokens+max(0, sec-stamp)*m.rate)
	ok := filled >= m.cost
	if ok {
		filled -= m.cost
	}
	m.tokens, m.stamp, m.set = filled, sec, true
	return ok
}

// TestImportSCGSameAdmissions sends one request sequence through a
// translated route (replenishRate 2, burstCapacity 5, requestedTokens 1,
// then requestedTokens 2 on a second route) and checks every answer
// against SCG's decision for the same second: bursts within a second,
// the refill after one second, and after two. It does so for both of
// SCG's key layouts: SCG 4.2.0 and later (the default) keep a bucket per
// route and user, SCG up to 4.1.x (--scg-version 4.1) one per user that
// both routes draw on. A step whose requests straddle a second of Redis
// TIME cannot be judged; the sequence then starts over with a fresh user
// (a few times at most).
func TestImportSCGSameAdmissions(t *testing.T) {
	redistest.Check(t, standaloneErr)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer upstream.Close()
	host, port, _ := strings.Cut(standalone.Addr(), ":")
	scg := fmt.Sprintf(`server: {address: 127.0.0.1, port: 0}
spring:
  data: {redis: {host: %[1]s, port: %[2]s}}
  cloud:
    gateway:
      server:
        webflux:
          routes:
          - id: one
            uri: %[3]s
            predicates: [Path=/one]
            filters:
            - name: RequestRateLimiter
              args: {key-resolver: "#{@userKeyResolver}", redis-rate-limiter.replenishRate: 2, redis-rate-limiter.burstCapacity: 5}
          - id: two
            uri: %[3]s
            predicates: [Path=/two]
            filters:
            - name: RequestRateLimiter
              args: {key-resolver: "#{@userKeyResolver}", redis-rate-limiter.replenishRate: 2, redis-rate-limiter.burstCapacity: 5, redis-rate-limiter.requestedTokens: 2}
`, host, port, upstream.URL)
	rc, err := redistest.Dial(context.Background(), standalone.Addr(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for _, layout := range []struct {
		name   string
		flags  []string
		shared bool // both routes draw on the user's one bucket
	}{
		{"scg", nil, false},
		{"scg-4.1", []string{"--scg-version", "4.1.9"}, true},
	} {
		t.Run(layout.name, func(t *testing.T) {
			p := start(t, importSCG(t, scg, 0, append(layout.flags, "--key-resolver", "userKeyResolver=header:X-User-Id")...))
			sameAdmissions(t, p, rc, layout.shared)
		})
	}
}

// sameAdmissions runs TestImportSCGSameAdmissions' sequence on p.
func sameAdmissions(t *testing.T, p *proc, rc *redistest.Conn, shared bool) {
	// Each step: the second to wait for (relative to the first), then the paths sent.
	steps := []struct {
		at    int64
		paths []string
	}{
		{0, []string{"/one", "/one", "/one", "/one", "/one", "/one", "/one"}},
		{1, []string{"/one", "/one", "/one"}},
		{3, []string{"/two", "/two", "/one", "/two", "/one", "/one"}},
		{4, []string{"/two", "/one", "/two"}},
	}
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatal("every attempt had a step straddling a second of Redis TIME")
		}
		user := fmt.Sprintf("same-%d", time.Now().UnixNano())
		// Each request costs its route's tokens, from the route's own
		// bucket (SCG 4.2.0 and later: the key names the route) or from the
		// user's one bucket (before: it does not).
		cost := map[string]int64{"/one": 1, "/two": 2}
		models := map[string]*scgModel{"/one": {rate: 2, burst: 5}, "/two": {rate: 2, burst: 5}}
		if shared {
			models["/two"] = models["/one"]
		}
		s0 := redisSecond(t, rc) + 1
		clean := true
		var got, want []bool
		for _, st := range steps {
			for redisSecond(t, rc) < s0+st.at {
				time.Sleep(5 * time.Millisecond) // polling Redis' clock, under a second
			}
			for _, path := range st.paths {
				r := get(t, p.base+path, "X-User-Id", user)
				if r.code != 200 && r.code != 429 {
					t.Fatalf("%s: %d %s", path, r.code, r.body)
				}
				got = append(got, r.code == 200)
			}
			if redisSecond(t, rc) != s0+st.at {
				clean = false
				break
			}
			for _, path := range st.paths {
				m := models[path]
				m.cost = cost[path]
				want = append(want, m.allow(s0+st.at))
			}
		}
		if !clean {
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("admissions %v, SCG's %v", got, want)
		}
		return
	}
}

// scgScript decides one request the way Spring Cloud Gateway's
// RedisRateLimiter script does (docs/migrating-from-scg.md), with its
// arguments: KEYS the tokens and timestamp keys, ARGV replenishRate,
// burstCapacity, (unused) and requestedTokens. It returns allowed (1 or 0),
// the tokens left and the Redis second it decided at.
const scgScript = `
local rate, capacity, requested = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4])
local now = tonumber(redis.call('TIME')[1])
local ttl = math.floor(capacity / rate * 2)
local tokens = tonumber(redis.call('GET', KEYS[1])) or capacity
local stamp = tonumber(redis.call('GET', KEYS[2])) or 0
local filled = math.min(capacity, tokens + math.max(0, now - stamp) * rate)
local allowed = 0
if filled >= requested then
  allowed, filled = 1, filled - requested
end
if ttl > 0 then
  redis.call('SETEX', KEYS[1], ttl, filled)
  redis.call('SETEX', KEYS[2], ttl, now)
end
return {allowed, filled, now}
`

// scgAllow runs scgScript for one request of cost 1 on SCG's keys prefix
// (request_rate_limiter.{...}) and returns whether SCG admitted it and the
// Redis second it decided at.
func scgAllow(t *testing.T, rc *redistest.Conn, prefix string, rate, burst int) (bool, int64) {
	t.Helper()
	v, err := rc.Do("EVAL", scgScript, "2", prefix+".tokens", prefix+".timestamp", strconv.Itoa(rate), strconv.Itoa(burst), "", "1")
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("SCG script: %#v", v)
	}
	allowed, _ := arr[0].(int64)
	sec, _ := arr[2].(int64)
	return allowed == 1, sec
}

// TestImportSCGSharesWithSCG: a translated config shares each user's budget
// with SCG instances running SCG's script on the same Redis, in the key
// layout of their version: by default SCG 4.2.0 and later, whose keys name
// the route, and with --scg-version 4.1.9 the older keys. Within one second
// of Redis TIME, what one side took of the burst of 5 is missing for the
// other: together they admit 5, not 5 by SCG plus 5 by sluice.
func TestImportSCGSharesWithSCG(t *testing.T) {
	redistest.Check(t, standaloneErr)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer upstream.Close()
	host, port, _ := strings.Cut(standalone.Addr(), ":")
	scg := fmt.Sprintf(`server: {address: 127.0.0.1, port: 0}
spring:
  data: {redis: {host: %s, port: %s}}
  cloud:
    gateway:
      routes:
      - id: orders
        uri: %s
        predicates: [Path=/orders/**]
        filters:
        - name: RequestRateLimiter
          args: {key-resolver: "#{@userKeyResolver}", redis-rate-limiter.replenishRate: 1, redis-rate-limiter.burstCapacity: 5}
`, host, port, upstream.URL)
	rc, err := redistest.Dial(context.Background(), standalone.Addr(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	const burst = 5
	for _, layout := range []struct {
		name  string
		flags []string
		keys  func(user string) string // SCG's key prefix for user
	}{
		{"scg", nil, func(user string) string { return "request_rate_limiter.{orders." + user + "}" }},
		{"scg-4.1", []string{"--scg-version", "4.1.9"}, func(user string) string { return "request_rate_limiter.{" + user + "}" }},
	} {
		t.Run(layout.name, func(t *testing.T) {
			p := start(t, importSCG(t, scg, 0, append(layout.flags, "--key-resolver", "userKeyResolver=header:X-User-Id")...))
			sluice := func(user string) bool {
				r := get(t, p.base+"/orders/1", "X-User-Id", user)
				if r.code != 200 && r.code != 429 {
					t.Fatalf("sluice: %d %s", r.code, r.body)
				}
				return r.code == 200
			}
			for _, scgFirst := range []bool{true, false} {
				for attempt := 0; ; attempt++ {
					if attempt == 5 {
						t.Fatal("every attempt straddled a second of Redis TIME")
					}
					user := fmt.Sprintf("shares-%d", time.Now().UnixNano())
					sec := redisSecond(t, rc)
					first, second := 0, 0
					for range burst {
						if scgFirst {
							if ok, _ := scgAllow(t, rc, layout.keys(user), 1, burst); ok {
								first++
							}
						} else if sluice(user) {
							first++
						}
					}
					if scgFirst {
						if sluice(user) {
							second++
						}
					} else if ok, _ := scgAllow(t, rc, layout.keys(user), 1, burst); ok {
						second++
					}
					if redisSecond(t, rc) != sec {
						continue // a second went by and refilled a token: try again
					}
					if first != burst || second != 0 {
						t.Fatalf("SCG first %v: the first side admitted %d of %d, the other then %d; want %d and 0 (one budget)", scgFirst, first, burst, second, burst)
					}
					break
				}
			}
		})
	}
}
