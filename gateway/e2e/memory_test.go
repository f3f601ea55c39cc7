package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// header is the listeners' part of every e2e config.
const header = `
server:
  listen: "127.0.0.1:0"
  shutdown_timeout: 10s
admin:
  listen: "127.0.0.1:0"
`

// algorithmsConfig has one route per algorithm, each admitting a burst of 5
// per user and refilling so slowly that no test sees a refill.
func algorithmsConfig(up string) string {
	return header + `
policies:
  token_bucket:   {algorithm: token_bucket,   capacity: 5, rate: 0.001}
  leaky_bucket:   {algorithm: leaky_bucket,   capacity: 5, rate: 0.001}
  fixed_window:   {algorithm: fixed_window,   limit: 5, window: 24h}
  sliding_log:    {algorithm: sliding_log,    limit: 5, window: 24h}
  sliding_window: {algorithm: sliding_window, limit: 5, window: 24h}
  gcra:           {algorithm: gcra,           rate: 0.001, burst: 5}
routes:
` + routesFor(up, "token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_window", "gcra")
}

func routesFor(up string, algs ...string) string {
	var b strings.Builder
	for _, a := range algs {
		fmt.Fprintf(&b, `  - id: %[1]s
    match: {path: /%[1]s/**}
    upstream: %[2]s
    limits:
      - {policy: %[1]s, key: header:X-User-Id}
`, a, up)
	}
	return b.String()
}

var algorithms = []string{"token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_window", "gcra"}

// checkBursts sends 8 requests per algorithm for one user and checks that
// exactly 5 pass, the rest get the 429 of docs/semantics.md §5.3, and the upstream only sees the 5.
func checkBursts(t *testing.T, bases []string, up *upstream, user string) {
	for _, alg := range algorithms {
		t.Run(alg, func(t *testing.T) {
			before := up.hits.Load()
			for i := range 8 {
				base := bases[i%len(bases)]
				r := get(t, base+"/"+alg+"/x", "X-User-Id", user)
				wantOK := i < 5
				if wantOK != (r.code == 200) {
					t.Fatalf("request %d: status %d, want %s", i+1, r.code, map[bool]string{true: "200", false: "429"}[wantOK])
				}
				if got, want := r.header.Get("X-RateLimit-Remaining"), strconv.Itoa(max(0, 4-i)); got != want {
					t.Errorf("request %d: X-RateLimit-Remaining = %q, want %s", i+1, got, want)
				}
				if r.header.Get("X-RateLimit-Limit") != "5" || r.header.Get("X-RateLimit-Reset") == "" {
					t.Errorf("request %d: X-RateLimit-Limit = %q, Reset = %q", i+1, r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Reset"))
				}
				if !strings.HasPrefix(r.header.Get("RateLimit-Policy"), `"`+alg+`";q=5;w=`) {
					t.Errorf("request %d: RateLimit-Policy = %q", i+1, r.header.Get("RateLimit-Policy"))
				}
				if !wantOK {
					check429(t, r, alg)
				}
			}
			if got := up.hits.Load() - before; got != 5 {
				t.Errorf("upstream saw %d requests, want 5 (never on 429)", got)
			}
		})
	}
}

// check429 checks a denial's headers and body (docs/semantics.md §5).
func check429(t *testing.T, r response, policies ...string) {
	t.Helper()
	if r.code != 429 {
		t.Fatalf("status %d, want 429", r.code)
	}
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Errorf("Retry-After = %q, want an integer ≥ 1", r.header.Get("Retry-After"))
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var body struct {
		Type, Title, Detail, Error, Message string
		Status, RetryAfter                  int
		Violated                            []string `json:"violated-policies"`
	}
	body.RetryAfter = -1
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("429 body %q: %v", r.body, err)
	}
	var raw map[string]any
	json.Unmarshal([]byte(r.body), &raw)
	detail := fmt.Sprintf("Rate limit exceeded. Please retry after %d seconds.", ra)
	if ra == 1 {
		detail = "Rate limit exceeded. Please retry after 1 second."
	}
	if body.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || body.Title != "Too Many Requests" ||
		body.Status != 429 || body.Error != "Too Many Requests" || body.Detail != detail || body.Message != detail ||
		raw["retry_after"] != float64(ra) || strings.Join(body.Violated, ",") != strings.Join(policies, ",") {
		t.Errorf("429 body = %s, want docs/semantics.md §5.3's with retry after %d and violated %v", r.body, ra, policies)
	}
}

func TestMemoryAlgorithmBursts(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `store: {type: memory}`+"\n"+algorithmsConfig(up.URL))
	checkBursts(t, []string{p.base}, up, "alice")
	// Another user has a budget of its own.
	if r := get(t, p.base+"/gcra/x", "X-User-Id", "bob"); r.code != 200 {
		t.Errorf("bob's first request = %d, want 200", r.code)
	}
	// Each limit's verdict counts once (docs/semantics.md §6.5).
	if got := p.metric(`sluice_decisions_total{policy="gcra",result="denied",route="gcra"}`); got != "3" {
		t.Errorf("denied decisions for gcra = %q, want 3", got)
	}
	if got := p.metric(`sluice_requests_total{code="429",route="token_bucket"}`); got != "3" {
		t.Errorf("429s counted for token_bucket = %q, want 3", got)
	}
	if r := get(t, p.base+"/gcra/x"); r.code != 403 {
		t.Errorf("no X-User-Id: status %d, want 403 (on_empty_key deny)", r.code)
	} else {
		checkProblem(t, r, 403)
	}
	if up.hits.Load() != 31 {
		t.Errorf("upstream hits = %d, want 31", up.hits.Load())
	}
}

// checkProblem checks a non-429 gateway answer (docs/semantics.md §5.3).
func checkProblem(t *testing.T, r response, status int) {
	t.Helper()
	want := fmt.Sprintf(`"type":"about:blank","title":%q,"status":%d`, http.StatusText(status), status)
	if r.code != status || !strings.Contains(r.body, want) || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("answer %d %s, want %d with %s", r.code, r.body, status, want)
	}
	var m map[string]any
	if json.Unmarshal([]byte(r.body), &m) != nil || m["error"] != http.StatusText(status) || m["detail"] != m["message"] {
		t.Errorf("body %s: error must be the status text and detail = message", r.body)
	}
}

// allOrNothingConfig: per-user capacity 5 plus a global fixed window of 3
// per window.
func allOrNothingConfig(store, up, window string) string {
	return store + header + `
policies:
  per-user: {algorithm: token_bucket, capacity: 5, rate: 0.001}
  global:   {algorithm: fixed_window, limit: 3, window: ` + window + `}
routes:
  - id: api
    match: {path: /api/**}
    upstream: ` + up + `
    limits:
      - {policy: per-user, key: header:X-User-Id}
      - {policy: global, key: const:all}
`
}

// checkAllOrNothing: the user gets 3 (global), then 429s that consume
// nothing from per-user, then after the window exactly 2 more.
func checkAllOrNothing(t *testing.T, base string, window time.Duration) {
	// Start right after a window boundary so the first 3 and the denials
	// share one window.
	waitWindowStart(window)
	got := 0
	for i := range 6 {
		r := get(t, base+"/api/x", "X-User-Id", "u1")
		if r.code == 200 {
			got++
		} else if i >= 3 {
			check429(t, r, "global")
		}
	}
	if got != 3 {
		t.Fatalf("first window: %d admitted, want 3 (the global limit)", got)
	}
	waitWindowStart(window)
	got = 0
	for range 6 {
		r := get(t, base+"/api/x", "X-User-Id", "u1")
		if r.code == 200 {
			got++
		} else if r.code == 429 && !strings.Contains(r.body, `"per-user"`) {
			t.Errorf("second window denial names %s, want per-user", r.body)
		}
	}
	if got != 2 {
		t.Errorf("second window: %d admitted, want exactly 2 (5 − 3; denials consumed nothing)", got)
	}
}

// waitWindowStart sleeps until just after the next multiple of window since
// the epoch (windows are epoch-aligned, docs/semantics.md §2.6). Bounded by window.
func waitWindowStart(window time.Duration) {
	now := time.Now()
	next := now.Truncate(window).Add(window)
	time.Sleep(next.Sub(now) + 20*time.Millisecond)
}

func TestMemoryAllOrNothing(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, allOrNothingConfig("store: {type: memory}", up.URL, "1s"))
	checkAllOrNothing(t, p.base, time.Second)
}

func TestShadowOverridesPlans(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, shadowOverridesPlansConfig(`store: {type: memory}`, up.URL))
	checkShadowOverridesPlans(t, p)
}

// shadowOverridesPlansConfig has a shadow-only route and a route whose
// policy comes from an override, a plan or the default (docs/semantics.md §7).
func shadowOverridesPlansConfig(store, up string) string {
	return store + header + `
policies:
  tiny:      {algorithm: fixed_window, limit: 2, window: 24h}
  base:      {algorithm: fixed_window, limit: 3, window: 24h}
  vip:       {algorithm: fixed_window, limit: 6, window: 24h}
  pro-tier:  {algorithm: fixed_window, limit: 4, window: 24h}
routes:
  - id: shadowed
    match: {path: /shadow}
    respond: {body: "ok\n"}
    limits:
      - {policy: tiny, key: header:X-User-Id, shadow: true}
  - id: tiered
    match: {path: /tiered}
    upstream: ` + up + `
    limits:
      - policy: base
        key: header:X-User-Id
        overrides: {vip-user: vip}
        plans:
          from: header:X-Plan
          policies: {pro: pro-tier}
`
}

// tierCase is one user and plan on the tiered route: the policy that should
// decide and how many of 8 requests it admits.
type tierCase struct {
	user, plan, policy string
	admitted           int
}

// tierCases run in order on a fresh shadowOverridesPlansConfig gateway.
var tierCases = []tierCase{
	{"plain", "", "base", 3},
	{"vip-user", "", "vip", 6},
	{"vip-user-2", "pro", "pro-tier", 4},
	{"free", "free", "base", 3},
	{"vip-user", "pro", "vip", 0}, // override beats plan; vip already spent
}

// checkShadowOverridesPlans: a shadow limit never denies and shows in no
// header but counts shadow_denied; overrides beat plans, which beat the
// default policy, each a budget of its own. It runs tierCases, then extra.
func checkShadowOverridesPlans(t *testing.T, p *proc, extra ...tierCase) {
	t.Run("shadow", func(t *testing.T) {
		for i := range 4 {
			r := get(t, p.base+"/shadow", "X-User-Id", "s")
			if r.code != 200 || r.body != "ok\n" {
				t.Errorf("request %d through a shadow limit = %d, want 200", i+1, r.code)
			}
			for _, h := range []string{"X-RateLimit-Limit", "RateLimit-Policy", "RateLimit", "Retry-After"} {
				if r.header.Get(h) != "" {
					t.Errorf("shadow limit shows in %s: %q", h, r.header.Get(h))
				}
			}
		}
		if got := p.metric(`sluice_decisions_total{policy="tiny",result="shadow_denied",route="shadowed"}`); got != "2" {
			t.Errorf("shadow_denied = %q, want 2", got)
		}
		if got := p.metric(`sluice_decisions_total{policy="tiny",result="allowed",route="shadowed"}`); got != "2" {
			t.Errorf("shadow allowed = %q, want 2", got)
		}
	})
	t.Run("overrides and plans", func(t *testing.T) {
		for _, tt := range append(slices.Clone(tierCases), extra...) {
			got := 0
			for range 8 {
				r := get(t, p.base+"/tiered", "X-User-Id", tt.user, "X-Plan", tt.plan)
				if r.code == 200 {
					got++
				} else {
					check429(t, r, tt.policy)
				}
			}
			if got != tt.admitted {
				t.Errorf("user %q plan %q: %d admitted, want %d (%s)", tt.user, tt.plan, got, tt.admitted, tt.policy)
			}
		}
	})
}

func TestHostileKeysAreIsolated(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `store: {type: memory}`+header+`
policies:
  two: {algorithm: token_bucket, capacity: 2, rate: 0.001}
routes:
  - id: api
    match: {path: /api}
    upstream: `+up.URL+`
    limits:
      - {policy: two, key: ["header:X-A", "header:X-B"]}
`)
	hostile := [][2]string{
		{"a", "b"}, {"a:b", "c"}, {"a", "b:c"}, {"1:a", "b"}, {"{slot}", "x"}, {"{", "}"},
		{"*", "?"}, {"a b", "c"}, {"ünï", "çødé"}, {strings.Repeat("k", 4000), "z"}, {"a\\", "b"}, {"sluice", "api"},
	}
	for _, kv := range hostile {
		for i := range 3 {
			r := get(t, p.base+"/api", "X-A", kv[0], "X-B", kv[1])
			if want := i < 2; want != (r.code == 200) {
				t.Errorf("key (%q, %q) request %d: status %d; each key must have its own budget of 2", trunc(kv[0]), kv[1], i+1, r.code)
			}
		}
	}
}

func trunc(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

func TestLargeBodyAndErrors(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `store: {type: memory}`+header+`
policies:
  many: {algorithm: token_bucket, capacity: 100, rate: 100}
routes:
  - id: hash
    match: {path: /hash, methods: [POST]}
    upstream: `+up.URL+`
    limits: [{policy: many, key: ip}]
  - id: slow
    match: {path: /slow}
    upstream: `+up.URL+`
    timeout: 100ms
  - id: dead
    match: {path: /dead}
    upstream: http://127.0.0.1:1
`)
	body := make([]byte, 1<<20)
	rand.Read(body)
	sum := sha256.Sum256(body)
	r := do(t, "POST", p.base+"/hash", bytes.NewReader(body))
	if r.code != 200 || r.body != hex.EncodeToString(sum[:]) || r.header.Get("X-Length") != "1048576" {
		t.Errorf("1 MiB body: upstream saw length %s hash %s, want 1048576 %x", r.header.Get("X-Length"), r.body, sum)
	}
	checkProblem(t, get(t, p.base+"/hash"), 404) // method mismatch
	checkProblem(t, get(t, p.base+"/nowhere"), 404)
	checkProblem(t, get(t, p.base+"/slow?sleep=2s"), 504)
	checkProblem(t, get(t, p.base+"/dead"), 502)
	checkProblem(t, get(t, p.base+"/hash", "X-Big", strings.Repeat("b", 17<<10)), 431)
	if got := p.metric(`sluice_upstream_duration_seconds_count{route="hash"}`); got != "1" {
		t.Errorf("upstream duration samples for hash = %q, want 1", got)
	}
	if r := get(t, p.admin+"/readyz"); r.code != 200 {
		t.Errorf("/readyz = %d, want 200", r.code)
	}
	if r := get(t, p.admin+"/admin/"); r.code != 404 {
		t.Errorf("/admin/ without a token configured = %d, want 404", r.code)
	}
}

func TestHotReloadUnderTraffic(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	cfg := func(body string) string {
		return `store: {type: memory}` + header + `
policies:
  lots: {algorithm: token_bucket, capacity: 100000, rate: 1000}
  three: {algorithm: fixed_window, limit: 3, window: 24h}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "` + body + `"}
    limits: [{policy: lots, key: ip}]
  - id: api
    match: {path: /api/**}
    upstream: ` + up.URL + `
    limits: [{policy: three, key: const:x}]
`
	}
	p := start(t, cfg("v0"))
	// Spend 2 of the api budget before any reload.
	for range 2 {
		get(t, p.base+"/api/a")
	}
	var failed, sent atomic.Int64
	seen := sync.Map{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer halt()
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", p.base+"/hello", nil)
				resp, err := client.Do(req)
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					continue
				}
				var b bytes.Buffer
				b.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
				seen.Store(b.String(), true)
			}
		})
	}
	for i := 1; i <= 3; i++ {
		writeFile(t, p.config, cfg(fmt.Sprintf("v%d", i)))
		p.signal(syscall.SIGHUP)
		p.waitLog("config reloaded", i)
		// Let traffic run on each config before the next reload.
		for n := sent.Load() + 100; sent.Load() < n && failed.Load() == 0; {
			time.Sleep(time.Millisecond) // bounded by the requests' own pace
		}
	}
	// A broken file is logged and the running config stays.
	writeFile(t, p.config, "routes: [oops\n")
	p.signal(syscall.SIGHUP)
	p.waitLog("reload failed", 1)
	halt()
	t.Logf("sent %d requests", sent.Load())
	if failed.Load() != 0 || sent.Load() < 300 {
		t.Errorf("%d of %d requests failed during reloads, want 0 of at least 300", failed.Load(), sent.Load())
	}
	if r := get(t, p.base+"/hello"); r.body != "v3" {
		t.Errorf("after reloads and a broken file: body %q, want v3", r.body)
	}
	if _, ok := seen.Load("v3"); !ok {
		t.Error("traffic never saw the reloaded config")
	}
	// The memory store survived the reloads: 1 left of 3.
	if r := get(t, p.base+"/api/a"); r.code != 200 {
		t.Errorf("third api request after reloads = %d, want 200", r.code)
	}
	if r := get(t, p.base+"/api/a"); r.code != 429 {
		t.Errorf("fourth api request after reloads = %d, want 429 (reload must keep budgets)", r.code)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := writeFileAtomic(path, data); err != nil {
		t.Fatal(err)
	}
}

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `store: {type: memory}`+header+`
routes:
  - id: api
    match: {path: /api/**}
    upstream: `+up.URL+`
`)
	done := make(chan response, 1)
	go func() { done <- get(t, p.base+"/api/slow?sleep=700ms") }()
	for up.hits.Load() == 0 {
		time.Sleep(5 * time.Millisecond) // until the request reached the upstream; bounded by the test timeout
	}
	p.signal(syscall.SIGTERM)
	r := <-done
	if r.code != 200 || r.body != "upstream /api/slow" {
		t.Errorf("in-flight request across SIGTERM = %d %q, want 200 from the upstream", r.code, r.body)
	}
	if code := p.wait(10 * time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if !strings.Contains(p.logs.String(), "stopped") {
		t.Errorf("logs lack the stop line:\n%s", p.logs)
	}
}

func TestShutdownTimeoutCutsOff(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `
server: {listen: "127.0.0.1:0", shutdown_timeout: 300ms}
admin: {listen: "127.0.0.1:0"}
routes:
  - id: api
    match: {path: /api/**}
    upstream: `+up.URL+`
`)
	done := make(chan error, 1)
	go func() {
		resp, err := client.Get(p.base + "/api/stuck?sleep=20s")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	for up.hits.Load() == 0 {
		time.Sleep(5 * time.Millisecond) // until the request reached the upstream; bounded by the test timeout
	}
	start := time.Now()
	p.signal(syscall.SIGTERM)
	if code := p.wait(5 * time.Second); code != 0 {
		t.Errorf("exit code = %d, want 0", code)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("exit took %v with shutdown_timeout 300ms", took)
	}
	if err := <-done; err == nil {
		t.Error("the request still running at the shutdown timeout completed; want it cut off")
	}
	if !strings.Contains(p.logs.String(), "cutting off requests still running") {
		t.Errorf("the cut-off is not logged:\n%s", p.logs)
	}
}
