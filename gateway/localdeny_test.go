package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/localdeny"
)

// The config's default must be the package's.
func TestLocalDenyMaxKeysDefault(t *testing.T) {
	if config.DefaultLocalDenyMaxKeys != localdeny.DefaultMaxKeys {
		t.Errorf("config.DefaultLocalDenyMaxKeys = %d, localdeny.DefaultMaxKeys = %d", config.DefaultLocalDenyMaxKeys, localdeny.DefaultMaxKeys)
	}
}

// scriptMonitor counts the rate-limit scripts a Redis server runs (EVALSHA
// or EVAL on anything but the overrides table, which the gateway polls on
// its own), from its MONITOR stream.
type scriptMonitor struct{ m *redistest.Monitor }

func newScriptMonitor(t *testing.T, srv *redistest.Server) *scriptMonitor {
	t.Helper()
	m, err := srv.Monitor()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &scriptMonitor{m: m}
}

// calls returns the number of rate-limit script calls Redis ran since the
// last call.
func (s *scriptMonitor) calls(t *testing.T) int {
	t.Helper()
	lines, err := s.m.Lines(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range lines {
		if (strings.Contains(line, `"EVALSHA"`) || strings.Contains(line, `"EVAL"`)) && !strings.Contains(line, ":{"+overridesTable+"}") {
			n++
		}
	}
	return n
}

// TestLocalDenyOnRedis: with the Redis store (store.local_deny on by
// default), an abusive key's requests stop reaching Redis once Redis has
// denied it: they are answered 429 with the right Retry-After and quota
// headers, counted in sluice_local_deny_decisions_total, and the first
// request once the denial has run out reaches Redis again and is admitted.
// Other keys are unaffected, and an admin reset frees a key at once on this
// instance.
func TestLocalDenyOnRedis(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	mon := newScriptMonitor(t, srv)
	rc := config.Route{ID: "hello", Match: config.Match{Path: "/hello"}, Respond: &config.Respond{Status: 200, Body: "hi\n"},
		Limits: []config.Limit{{Policy: "pair", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}},
			Cost: 1, OnEmptyKey: httplimit.EmptyKeyDeny}}}
	cfg := testConfig(rc)
	cfg.Policies["pair"] = config.PolicySpec{Algorithm: ratelimit.TokenBucket, Capacity: 2, Rate: 2} // one unit per 500ms
	cfg.Store.Type, cfg.Store.Timeout = config.StoreRedis, time.Second
	cfg.Store.Redis = config.Redis{Mode: config.RedisStandalone, Addrs: []string{srv.Addr()}}
	cfg.Admin.Token = "tok"
	g := newTestGateway(t, cfg)
	send := func(user string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/hello", nil)
		req.Header.Set("X-User", user)
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		return rec
	}

	for i, want := range []int{200, 200, 429} {
		if got := send("abuser").Code; got != want {
			t.Fatalf("request %d of abuser = %d, want %d", i+1, got, want)
		}
	}
	deniedAt := time.Now()
	if n := mon.calls(t); n < 3 {
		t.Fatalf("%d script calls for the first 3 requests, want at least 3", n)
	}
	const abusive = 50
	for i := range abusive {
		rec := send("abuser")
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("abusive request %d = %d, want 429", i+1, rec.Code)
		}
		h := rec.Header()
		if h.Get("Retry-After") != "1" || h.Get(httplimit.HeaderRemaining) != "0" || h.Get(httplimit.HeaderLimit) != "2" ||
			h.Get(httplimit.HeaderRateLimit) != `"pair";r=0;t=1` {
			t.Fatalf("abusive request %d: headers %v", i+1, h)
		}
		var body struct {
			RetryAfter int64    `json:"retry_after"`
			Violated   []string `json:"violated-policies"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.RetryAfter != 1 || len(body.Violated) != 1 || body.Violated[0] != "pair" {
			t.Fatalf("abusive request %d: body %s (%v)", i+1, rec.Body, err)
		}
	}
	if n := mon.calls(t); n != 0 {
		t.Fatalf("%d script calls for %d requests of a key Redis denied, want 0", n, abusive)
	}
	if time.Since(deniedAt) >= 450*time.Millisecond {
		t.Skip("the machine is too slow for this timeline: the denial may have run out")
	}
	_, metrics, _ := call(t, g.admin, "GET", "/metrics", "")
	if want := fmt.Sprintf(`sluice_local_deny_decisions_total{route="hello"} %d`, abusive); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %q", want)
	}
	if got := send("someone").Code; got != 200 {
		t.Fatalf("another key = %d, want 200", got)
	}
	if n := mon.calls(t); n != 1 {
		t.Fatalf("another key: %d script calls, want 1", n)
	}

	// The denial ran out (one unit per 500ms): the next request reaches
	// Redis and is admitted.
	time.Sleep(time.Until(deniedAt.Add(550 * time.Millisecond)))
	if got := send("abuser").Code; got != 200 {
		t.Fatalf("abuser after its Retry-After = %d, want 200", got)
	}
	if n := mon.calls(t); n != 1 {
		t.Fatalf("abuser after its Retry-After: %d script calls, want 1", n)
	}

	// An admin reset forgets the key on this instance at once.
	for send("abuser").Code != http.StatusTooManyRequests {
	}
	if got := send("abuser").Code; got != http.StatusTooManyRequests {
		t.Fatalf("abuser = %d, want 429", got)
	}
	mon.calls(t)
	if code, body, _ := call(t, g.admin, "DELETE", "/admin/v1/limits/hello/abuser", "", bearer...); code != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s, want 204", code, body)
	}
	if got := send("abuser").Code; got != 200 {
		t.Fatalf("abuser after an admin reset = %d, want 200", got)
	}
}

// TestLocalDenyOff: store.local_deny.enabled false sends every request to
// Redis; the memory store has no local denials at all.
func TestLocalDenyOff(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	mon := newScriptMonitor(t, srv)
	rc := limitedRoute("hello", "/hello", "hi\n")
	rc.Limits[0].Key = httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}}
	cfg := testConfig(rc)
	cfg.Store.Type, cfg.Store.Timeout = config.StoreRedis, time.Second
	cfg.Store.Redis = config.Redis{Mode: config.RedisStandalone, Addrs: []string{srv.Addr()}}
	cfg.Store.LocalDeny.Enabled = new(false)
	g := newTestGateway(t, cfg)
	if g.store.deny != nil {
		t.Fatal("local_deny.enabled false: the store has local denials")
	}
	for range 3 {
		getHello(g, "u")
	}
	mon.calls(t)
	for range 5 {
		if got := getHello(g, "u"); got != http.StatusTooManyRequests {
			t.Fatalf("exhausted key = %d, want 429", got)
		}
	}
	if n := mon.calls(t); n != 5 {
		t.Fatalf("%d script calls for 5 denied requests with local_deny off, want 5", n)
	}
	mem := newTestGateway(t, testConfig(rc))
	if mem.store.deny != nil {
		t.Fatal("the memory store has local denials")
	}
}

// BenchmarkAbusiveKeyOnRedis times one request of a key Redis has denied,
// through the gateway's handler on a local redis-server, with
// store.local_deny on (answered by the instance) and off (a script call
// each).
func BenchmarkAbusiveKeyOnRedis(b *testing.B) {
	srv := redistest.NewServer(b, redistest.ServerOptions{})
	for _, on := range []bool{true, false} {
		b.Run(map[bool]string{true: "local_deny", false: "redis"}[on], func(b *testing.B) {
			rc := config.Route{ID: "hello", Match: config.Match{Path: "/hello"}, Respond: &config.Respond{Status: 200, Body: "hi\n"},
				Limits: []config.Limit{{Policy: "frozen", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}},
					Cost: 1, OnEmptyKey: httplimit.EmptyKeyDeny}}}
			cfg := testConfig(rc)
			cfg.Policies["frozen"] = config.PolicySpec{Algorithm: ratelimit.TokenBucket, Capacity: 1, Rate: 0.001}
			cfg.Store.Type, cfg.Store.Timeout, cfg.Store.Prefix = config.StoreRedis, time.Second, fmt.Sprint("bench-", on)
			cfg.Store.Redis = config.Redis{Mode: config.RedisStandalone, Addrs: []string{srv.Addr()}}
			cfg.Store.LocalDeny.Enabled = new(on)
			g, err := New(cfg, Deps{})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			serveTestEngine(b, g)
			req := httptest.NewRequest("GET", "/hello", nil)
			req.Header.Set("X-User", "abuser")
			for range 2 {
				g.ServeHTTP(httptest.NewRecorder(), req)
			}
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				g.ServeHTTP(rec, req)
				if rec.Code != http.StatusTooManyRequests {
					b.Fatalf("status %d, want 429", rec.Code)
				}
			}
		})
	}
}
