package e2e

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// redisStores are the shared-store variants every Redis test runs on.
var redisStores = []struct {
	name  string
	store func(t *testing.T, prefix string) string // the store section
}{
	{"standalone", func(t *testing.T, prefix string) string {
		redistest.Check(t, standaloneErr)
		return fmt.Sprintf("store: {type: redis, prefix: %s, timeout: 500ms, redis: {addrs: [%q]}}\n", prefix, standalone.Addr())
	}},
	{"cluster", func(t *testing.T, prefix string) string {
		redistest.Check(t, clusterErr)
		return fmt.Sprintf("store: {type: redis, prefix: %s, timeout: 500ms, redis: {mode: cluster, addrs: [%s]}}\n",
			prefix, `"`+strings.Join(cluster.Addrs(), `", "`)+`"`)
	}},
}

// prefix returns a Redis key prefix of its own for one test.
func prefix(t *testing.T) string {
	return fmt.Sprintf("e2e-%d", time.Now().UnixNano())
}

func TestRedisAlgorithmBursts(t *testing.T) {
	t.Parallel()
	for _, rs := range redisStores {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			cfg := rs.store(t, prefix(t)) + algorithmsConfig(up.URL)
			a, b := start(t, cfg), start(t, cfg)
			// Alternate between two instances: the budget is shared.
			checkBursts(t, []string{a.base, b.base}, up, "alice")
			if r := get(t, a.admin+"/readyz"); r.code != 200 {
				t.Errorf("/readyz on Redis = %d, want 200", r.code)
			}
		})
	}
}

func TestRedisAllOrNothing(t *testing.T) {
	t.Parallel()
	for _, rs := range redisStores {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			p := start(t, allOrNothingConfig(rs.store(t, prefix(t)), up.URL, "1s"))
			checkAllOrNothing(t, p.base, time.Second)
		})
	}
}

// TestRedisInstancesShareOneBudget runs 2 and 3 gateways on one Redis and
// sends concurrent requests for one key through all of them: exactly the
// capacity is admitted in total.
func TestRedisInstancesShareOneBudget(t *testing.T) {
	t.Parallel()
	for _, rs := range redisStores {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/%d instances", rs.name, n), func(t *testing.T) {
				t.Parallel()
				up := newUpstream(t)
				cfg := rs.store(t, prefix(t)) + header + `
policies:
  shared: {algorithm: token_bucket, capacity: 25, rate: 0.001}
routes:
  - id: api
    match: {path: /api/**}
    upstream: ` + up.URL + `
    limits: [{policy: shared, key: header:X-User-Id}]
`
				var procs []*proc
				for range n {
					procs = append(procs, start(t, cfg))
				}
				var ok, limited atomic.Int64
				var wg sync.WaitGroup
				for w := range 12 {
					wg.Go(func() {
						for i := range 10 {
							r := get(t, procs[(w+i)%n].base+"/api/x", "X-User-Id", "together")
							switch r.code {
							case 200:
								ok.Add(1)
							case 429:
								limited.Add(1)
							default:
								t.Errorf("status %d: %s", r.code, r.body)
							}
						}
					})
				}
				wg.Wait()
				if ok.Load() != 25 || limited.Load() != 95 || up.hits.Load() != 25 {
					t.Errorf("%d instances, 120 concurrent requests: %d admitted, %d limited, upstream saw %d; want 25, 95, 25",
						n, ok.Load(), limited.Load(), up.hits.Load())
				}
			})
		}
	}
}

func TestRedisHostileKeysAreIsolated(t *testing.T) {
	t.Parallel()
	for _, rs := range redisStores {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			p := start(t, rs.store(t, prefix(t))+header+`
policies:
  two: {algorithm: sliding_log, limit: 2, window: 1h}
routes:
  - id: api
    match: {path: /api}
    upstream: `+up.URL+`
    limits: [{policy: two, key: ["header:X-A", "header:X-B"]}]
`)
			for _, kv := range [][2]string{
				{"a", "b"}, {"a:b", "c"}, {"a", "b:c"}, {"{slot}", "x"}, {"{", "}"}, {"}{", ""},
				{"*", "?"}, {"sluice", "e2e"}, {"ünï", "çødé"}, {strings.Repeat("k", 4000), "z"},
			} {
				if kv[1] == "" {
					continue
				}
				for i := range 3 {
					r := get(t, p.base+"/api", "X-A", kv[0], "X-B", kv[1])
					if want := i < 2; want != (r.code == 200) {
						t.Errorf("key (%q, %q) request %d: status %d %s; each key has its own budget of 2", trunc(kv[0]), kv[1], i+1, r.code, r.body)
					}
				}
			}
		})
	}
}

// TestRedisDownAtStart starts sluice on a Redis address where nothing
// listens: it starts and serves, each on_error mode as docs/semantics.md §6.3
// says.
func TestRedisDownAtStart(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode      string
		codes     []int
		ready     int
		fallbacks string
		quota     bool // responses carry RateLimit and X-RateLimit-*
	}{
		// docs/semantics.md §6.5 counts every request decided without the
		// store, local denials of keys the fallback already admitted for
		// included.
		{"local", []int{200, 200, 200, 429, 429}, 200, "5", true},
		// Admitted without counting: no quota headers.
		{"allow", []int{200, 200, 200, 200, 200}, 200, "5", false},
		{"deny", []int{503, 503, 503, 503, 503}, 503, "5", false},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			p := start(t, `store: {type: redis, on_error: `+tt.mode+`, timeout: 50ms, redis: {addrs: ["127.0.0.1:1"]}}`+header+`
policies:
  three: {algorithm: token_bucket, capacity: 3, rate: 0.001}
routes:
  - id: api
    match: {path: /api}
    upstream: `+up.URL+`
    limits: [{policy: three, key: header:X-User-Id}]
`)
			for i, want := range tt.codes {
				r := get(t, p.base+"/api", "X-User-Id", "u")
				if r.code != want {
					t.Errorf("request %d with Redis down, on_error %s: %d %s, want %d", i+1, tt.mode, r.code, r.body, want)
				}
				for _, name := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
					if got := r.header.Get(name) != ""; got != tt.quota {
						t.Errorf("request %d with Redis down, on_error %s: %s %q, want present %v", i+1, tt.mode, name, r.header.Get(name), tt.quota)
					}
				}
				if r.code == 503 {
					checkProblem(t, r, 503)
					if r.header.Get("Retry-After") != "1" {
						t.Errorf("503 Retry-After = %q, want 1", r.header.Get("Retry-After"))
					}
				}
			}
			if r := get(t, p.admin+"/readyz"); r.code != tt.ready {
				t.Errorf("/readyz with Redis down, on_error %s = %d, want %d", tt.mode, r.code, tt.ready)
			}
			if got := p.metric(`sluice_fallback_decisions_total{mode="` + tt.mode + `",route="api"}`); got != tt.fallbacks {
				t.Errorf("fallback decisions = %q, want %s", got, tt.fallbacks)
			}
			if p.metric(`sluice_store_errors_total{kind="connection"}`) == "" {
				t.Error("no store error of kind connection counted")
			}
		})
	}
}

// TestRedisReadyNeedsWrites (docs/reliability.md row C5): a Redis that
// answers PING but refuses writes (a master short of min-replicas-to-write)
// fails every decision, so under on_error deny the instance is not ready,
// even before any request has tripped the breaker; once Redis takes writes
// again it is ready and serves.
func TestRedisReadyNeedsWrites(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	up := newUpstream(t)
	p := start(t, `store: {type: redis, on_error: deny, timeout: 200ms, redis: {addrs: ["`+srv.Addr()+`"]}}`+header+`
policies:
  ten: {algorithm: token_bucket, capacity: 10, rate: 1}
routes:
  - id: api
    match: {path: /api}
    upstream: `+up.URL+`
    limits: [{policy: ten, key: header:X-User-Id}]
`)
	if r := get(t, p.admin+"/readyz"); r.code != 200 {
		t.Fatalf("/readyz on a writable Redis = %d %s, want 200", r.code, r.body)
	}
	if _, err := srv.Do("CONFIG", "SET", "min-replicas-max-lag", 10, "min-replicas-to-write", 1); err != nil {
		t.Fatal(err)
	}
	if r := get(t, p.admin+"/readyz"); r.code != 503 {
		t.Errorf("/readyz while Redis refuses writes = %d, want 503 (PING still answers)", r.code)
	}
	if r := get(t, p.base+"/api", "X-User-Id", "u"); r.code != 503 {
		t.Errorf("request while Redis refuses writes, on_error deny: %d %s, want 503", r.code, r.body)
	}
	if _, err := srv.Do("CONFIG", "SET", "min-replicas-to-write", 0); err != nil {
		t.Fatal(err)
	}
	// The breaker opened on the refusals: it lets a probe through once its
	// open interval has passed.
	deadline := time.Now().Add(15 * time.Second)
	for get(t, p.admin+"/readyz").code != 200 {
		if time.Now().After(deadline) {
			t.Fatal("/readyz not 200 within 15s of Redis taking writes again")
		}
		time.Sleep(100 * time.Millisecond) // polling the gateway, bounded
	}
	if r := get(t, p.base+"/api", "X-User-Id", "u"); r.code != 200 {
		t.Errorf("request once ready: %d %s, want 200", r.code, r.body)
	}
}
