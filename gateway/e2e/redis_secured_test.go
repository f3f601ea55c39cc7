package e2e

import (
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// securedRoute is one route limited to three requests per user.
func securedRoute(up string) string {
	return header + `
policies:
  three: {algorithm: token_bucket, capacity: 3, rate: 0.001}
routes:
  - id: api
    match: {path: /api}
    upstream: ` + up + `
    limits: [{policy: three, key: header:X-User-Id}]
`
}

// TestRedisEvictingPolicyWarned: a Redis whose maxmemory-policy may evict
// sluice's keys (each eviction a fresh budget) is named in one WARN at
// start-up, before any request, and not again after requests and a reload.
func TestRedisEvictingPolicyWarned(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t, redistest.ServerOptions{Args: []string{"--maxmemory-policy", "allkeys-lru"}})
	up := newUpstream(t)
	p := start(t, `store: {type: redis, timeout: 500ms, redis: {addrs: ["`+srv.Addr()+`"]}}`+securedRoute(up.URL))
	const warning = "maxmemory-policy may evict"
	p.waitLog(warning, 1)
	for _, line := range strings.Split(p.logs.String(), "\n") {
		if strings.Contains(line, warning) && !strings.Contains(line, "WARN") {
			t.Errorf("the warning is not at WARN: %s", line)
		}
	}
	for range 3 {
		if r := get(t, p.base+"/api", "X-User-Id", "u"); r.code != 200 {
			t.Fatalf("request: %d %s", r.code, r.body)
		}
	}
	p.signal(syscall.SIGHUP)
	p.waitLog("config reloaded", 1)
	if r := get(t, p.base+"/api", "X-User-Id", "u"); r.code != 429 {
		t.Errorf("4th request after the reload: %d, want 429 (same budget)", r.code)
	}
	if n := strings.Count(p.logs.String(), warning); n != 1 {
		t.Errorf("%d warnings about maxmemory-policy, want 1:\n%s", n, p.logs)
	}
}

// TestRedisSentinelSecured is Sentinel as Helm charts deploy it: sentinels
// behind a password and a least-privilege ACL user on the data nodes, which
// may run neither ROLE nor CONFIG. sluice decides on Redis (no fallback),
// says once that it cannot verify the master's role, and says nothing about
// the eviction policy it may not read.
func TestRedisSentinelSecured(t *testing.T) {
	t.Parallel()
	sn := redistest.NewSentinel(t, redistest.SentinelOptions{Password: "pw", SentinelPassword: "spw",
		Users: []string{"app on >apw ~* &* +@all -@dangerous"}})
	up := newUpstream(t)
	p := start(t, `store:
  type: redis
  timeout: 500ms
  on_error: deny
  redis:
    mode: sentinel
    master_name: `+sn.MasterName()+`
    addrs: ["`+strings.Join(sn.SentinelAddrs(), `", "`)+`"]
    username: app
    password: apw
    sentinel_password: spw
`+securedRoute(up.URL))
	for i, want := range []int{200, 200, 200, 429} {
		if r := get(t, p.base+"/api", "X-User-Id", "u"); r.code != want {
			t.Fatalf("request %d: %d %s, want %d", i+1, r.code, r.body, want)
		}
	}
	if n, err := sn.Master.Do("DBSIZE"); err != nil || n.(int64) == 0 {
		t.Errorf("master DBSIZE %v (%v), want the budget's key", n, err)
	}
	logs := p.logs.String()
	if n := strings.Count(logs, "may not run ROLE"); n != 1 {
		t.Errorf("%d warnings about ROLE, want 1:\n%s", n, logs)
	}
	if strings.Contains(logs, "maxmemory-policy") || strings.Contains(logs, "unavailable") {
		t.Errorf("unexpected log lines:\n%s", logs)
	}
}
