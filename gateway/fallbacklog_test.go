package gateway

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFallbackIsLogged: when the breaker opens (Redis unreachable, here from
// the start, as docs/reliability.md row C4's gateway started with every
// sentinel down), the gateway says so in its log once, with the error,
// besides sluice_fallback_active. deadRedisGateway returns a gateway whose
// Redis store points at a port nothing listens on, with on_error mode, its
// one route /hello limited per X-User header, and the buffer its logs go to,
// and the dead address.
func deadRedisGateway(t *testing.T, mode config.OnError) (*Gateway, *syncBuffer, string) {
	t.Helper()
	dead := testkit.ClosedAddr(t)
	logs := &syncBuffer{}
	rc := limitedRoute("hello", "/hello", "hi\n")
	rc.Limits[0].Key = httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}}
	cfg := testConfig(rc)
	cfg.Store.Type, cfg.Store.OnError = config.StoreRedis, mode
	cfg.Store.Redis = config.Redis{Mode: config.RedisStandalone, Addrs: []string{dead}}
	g, err := New(cfg, Deps{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	serveTestEngine(t, g)
	return g, logs, dead
}

// getHello sends GET /hello as user to g and returns the status.
func getHello(g *Gateway, user string) int {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/hello", nil)
	req.Header.Set("X-User", user)
	g.ServeHTTP(rec, req)
	return rec.Code
}

func TestFallbackIsLogged(t *testing.T) {
	g, logs, dead := deadRedisGateway(t, config.OnErrorLocal)
	// Five failures in a row open the breaker (store/fallback's default);
	// distinct keys, so that none is decided local-first as owing.
	for i := range 8 {
		if code := getHello(g, fmt.Sprint("u", i)); code != http.StatusOK && code != http.StatusTooManyRequests {
			t.Fatalf("request %d with Redis down = %d, want the local fallback's answer", i+1, code)
		}
	}
	var lines []string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "redis store unavailable") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines about the fallback, want 1; logs:\n%s", len(lines), logs.String())
	}
	for _, want := range []string{"level=WARN", "on_error=local", "kind=connection", dead} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("fallback log line lacks %q: %s", want, lines[0])
		}
	}
}

// TestDenyOutageLogsOnce: under on_error deny with Redis down, each request
// is a 503, and the log says the breaker opened once, not once per request
// (an audit saw a WARN "store failed" for every request of an outage).
func TestDenyOutageLogsOnce(t *testing.T) {
	g, logs, _ := deadRedisGateway(t, config.OnErrorDeny)
	for i := range 30 {
		if code := getHello(g, fmt.Sprint("u", i)); code != http.StatusServiceUnavailable {
			t.Fatalf("request %d with Redis down, on_error deny = %d, want 503", i+1, code)
		}
	}
	warns := 0
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			warns++
		}
	}
	if warns > 2 {
		t.Errorf("%d WARN lines for 30 denied requests, want the breaker's opening only; logs:\n%s", warns, logs.String())
	}
	if !strings.Contains(logs.String(), "redis store unavailable") {
		t.Errorf("the breaker's opening was not logged:\n%s", logs.String())
	}
}

// quotaHeaders are the response headers that state a budget.
var quotaHeaders = []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}

// TestAllowSendsNoQuota: under on_error allow with Redis down, requests are
// admitted without being counted, and their responses carry no quota
// headers: a full budget nobody counted would be a guess.
func TestAllowSendsNoQuota(t *testing.T) {
	g, _, _ := deadRedisGateway(t, config.OnErrorAllow)
	// Past the breaker's opening: failing calls, then the open breaker.
	for i := range 8 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/hello", nil)
		req.Header.Set("X-User", "u")
		g.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("request %d with Redis down = %d, want 200", i+1, rec.Code)
		}
		for _, name := range quotaHeaders {
			if v := rec.Header().Values(name); len(v) > 0 {
				t.Errorf("request %d: %s: %q; want no quota headers for an uncounted decision", i+1, name, v)
			}
		}
	}
}

// TestFallbackActiveGauge: sluice_fallback_active is wired to the fallback
// store (its Engaged rule, docs/operations.md, is tested in store/fallback):
// 0 before any request, 1 once a request was decided without Redis.
func TestFallbackActiveGauge(t *testing.T) {
	g, _, _ := deadRedisGateway(t, config.OnErrorLocal)
	_, _, admin := startServerURLs(t, g)
	if _, metrics, _ := get(t, admin+"/metrics"); !strings.Contains(metrics, "sluice_fallback_active 0") {
		t.Errorf("before any request: want sluice_fallback_active 0")
	}
	getHello(g, "u") // one decision made without Redis
	if _, metrics, _ := get(t, admin+"/metrics"); !strings.Contains(metrics, "sluice_fallback_active 1") {
		t.Errorf("after a decision made without Redis: want sluice_fallback_active 1")
	}
}
